import { describe, expect, it } from "vitest";
import { render, screen, waitFor } from "@testing-library/react";
import { Markdown } from "./Markdown";

describe("Markdown code blocks", () => {
  const cases = [
    { name: "a fenced Go block", text: "```go\nfunc main() {\n\treturn \"hi\" // done\n}\n```", keyword: "func", cls: ["hljs-keyword", "hljs-string", "hljs-comment"] },
    { name: "an alias (sh)", text: "```sh\necho \"$HOME\"\n```", keyword: "echo", cls: ["hljs-built_in", "hljs-string"] },
  ];
  for (const c of cases) {
    it(`highlights ${c.name} with highlight.js classes once the chunk loads`, async () => {
      const { container } = render(<Markdown text={c.text} />);
      expect(container.querySelector("pre code")?.textContent).toContain(c.keyword);
      await waitFor(() => {
        for (const cls of c.cls) expect(container.querySelector(`pre code .${cls}`)).not.toBeNull();
      });
    });
  }

  it("leaves an unknown language plain and never renders the model's markup", async () => {
    const { container } = render(<Markdown text={'```cobol\n<img src=x onerror="alert(1)">\n```'} />);
    await new Promise((r) => setTimeout(r, 50));
    expect(container.querySelector("img")).toBeNull();
    expect(container.querySelector("pre code span")).toBeNull();
    expect(screen.getByText(/onerror/)).toBeInTheDocument();
  });

  it("escapes markup inside a highlighted block", async () => {
    const { container } = render(<Markdown text={'```html\n<script>alert(1)</script>\n```'} />);
    await waitFor(() => expect(container.querySelector("pre code .hljs-tag")).not.toBeNull());
    expect(container.querySelector("script")).toBeNull();
  });

  // A link to javascript: or data: was kept as a link to "" (the app
  // itself, opened in a new tab); a safe link still opens a new tab.
  it("keeps a dangerous link's text and drops the link", () => {
    const { container } = render(
      <Markdown text={"[a](javascript:alert(1)) [b](data:text/html,<script>alert(1)</script>) [c](vbscript:msgbox) [d](https://example.com/x) [e](docs/x.md)"} />,
    );
    expect([...container.querySelectorAll("a")].map((a) => [a.textContent, a.getAttribute("href")])).toEqual([
      ["d", "https://example.com/x"],
      ["e", "docs/x.md"],
    ]);
    expect(container.textContent).toContain("a b c d e");
  });
});
