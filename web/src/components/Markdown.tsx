import ReactMarkdown from "react-markdown";
import { Code } from "../lib/highlight";

// Markdown renders model text and deliverables: no raw HTML (react-markdown
// escapes it), links open in a new tab without the opener, code blocks are
// highlighted (highlight.js grammars, loaded lazily: lib/highlight.tsx). A
// link whose URL react-markdown dropped (javascript:, data:, vbscript:…)
// is plain text: as a link to "" it opened the app itself in a new tab.
export function Markdown({ text }: { text: string }) {
  return (
    <div className="prose-log text-sm leading-relaxed break-words">
      <ReactMarkdown
        components={{
          a: ({ href, children }) =>
            href ? (
              <a href={href} target="_blank" rel="noopener noreferrer">
                {children}
              </a>
            ) : (
              <span>{children}</span>
            ),
          // A wide code block scrolls: keyboard users can reach it.
          pre: ({ children }) => <pre tabIndex={0}>{children}</pre>,
          code: ({ className, children }) => {
            const lang = /language-([\w+-]+)/.exec(className ?? "")?.[1];
            const src = String(children ?? "");
            if (!lang && !src.includes("\n")) return <code className={className}>{children}</code>;
            return <Code className={className} src={src.replace(/\n$/, "")} lang={lang} />;
          },
        }}
      >
        {text}
      </ReactMarkdown>
    </div>
  );
}
