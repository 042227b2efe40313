import ReactMarkdown from "react-markdown";
import { highlight } from "../lib/highlight";

// Markdown renders model text and deliverables: no raw HTML (react-markdown
// escapes it), links open in a new tab without the opener, fenced code gets
// the light highlighter.
export function Markdown({ text }: { text: string }) {
  return (
    <div className="prose-log text-sm leading-relaxed break-words">
      <ReactMarkdown
        components={{
          a: ({ href, children }) => (
            <a href={href} target="_blank" rel="noopener noreferrer">
              {children}
            </a>
          ),
          // A wide code block scrolls: keyboard users can reach it.
          pre: ({ children }) => <pre tabIndex={0}>{children}</pre>,
          code: ({ className, children }) => {
            const lang = /language-(\w+)/.exec(className ?? "")?.[1];
            const src = String(children ?? "");
            if (!lang && !src.includes("\n")) return <code className={className}>{children}</code>;
            return <code className={className}>{highlight(src)}</code>;
          },
        }}
      >
        {text}
      </ReactMarkdown>
    </div>
  );
}
