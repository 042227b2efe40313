import { Fragment, useEffect, useState, type ReactNode } from "react";
import { jsx, jsxs } from "react/jsx-runtime";
import { toJsxRuntime } from "hast-util-to-jsx-runtime";

type Highlighter = typeof import("./hl");

// The highlighter chunk, loaded once, on the first code block shown.
let loading: Promise<Highlighter> | undefined;
function loadHighlighter(): Promise<Highlighter> {
  loading ??= import("./hl");
  return loading;
}

// useHighlighted renders src highlighted as lang (docs/web-ui.md): plain
// text until the highlighter has loaded, or when it does not know the
// language; then highlight.js's classes (hljs-keyword, …) as React
// elements — no HTML string, so nothing the model wrote can become markup.
export function useHighlighted(src: string, lang: string | undefined): ReactNode {
  const [out, setOut] = useState<{ src: string; lang?: string; node: ReactNode } | null>(null);
  useEffect(() => {
    let live = true;
    loadHighlighter().then(
      (hl) => {
        const tree = hl.highlightTree(src, lang);
        if (live && tree) setOut({ src, lang, node: toJsxRuntime(tree, { Fragment, jsx, jsxs }) });
      },
      () => {}, // a chunk that fails to load leaves the code plain
    );
    return () => {
      live = false;
    };
  }, [src, lang]);
  return out && out.src === src && out.lang === lang ? out.node : src;
}

// Code is one highlighted code block's content.
export function Code({ src, lang, className }: { src: string; lang?: string; className?: string }) {
  return <code className={className}>{useHighlighted(src, lang)}</code>;
}
