import type { ReactNode } from "react";

// A deliberately small highlighter for code in model output: comments,
// strings, numbers and common keywords of the usual languages. It keeps the
// bundle light; what it does not know stays plain text.
const token =
  /(\/\/[^\n]*|#[^\n]*|\/\*[\s\S]*?\*\/)|("(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|`(?:[^`\\]|\\.)*`)|\b(\d+(?:\.\d+)?)\b|\b(func|function|return|if|else|for|while|const|let|var|import|export|from|package|type|struct|interface|class|def|async|await|true|false|null|nil|None|True|False|go|defer|range|switch|case|break|continue|new|in|of|try|catch|finally|throw|raise|with|as|echo|fi|then|do|done)\b/g;

export function highlight(src: string): ReactNode[] {
  const out: ReactNode[] = [];
  let last = 0;
  let k = 0;
  for (const m of src.matchAll(token)) {
    const at = m.index ?? 0;
    if (at > last) out.push(src.slice(last, at));
    const cls = m[1] ? "tok-com" : m[2] ? "tok-str" : m[3] ? "tok-num" : "tok-kw";
    out.push(
      <span key={k++} className={cls}>
        {m[0]}
      </span>,
    );
    last = at + m[0].length;
  }
  if (last < src.length) out.push(src.slice(last));
  return out;
}
