import { afterEach, describe, expect, it, vi } from "vitest";
import { render, screen } from "@testing-library/react";
import { PieceGraph } from "./PieceGraph";
import type { ParsedPiece } from "../lib/piecegraph";

// The general piece's shape: execute goes on to verify by a rule and by
// default_next, verify back to execute by a rule.
const piece: ParsedPiece = {
  name: "general",
  initial_movement: "execute",
  movements: [
    { name: "execute", rules: [{ condition: "the deliverable is finished and saved", next: "verify" }], default_next: "verify" },
    { name: "verify", rules: [{ condition: "the deliverable has defects to fix", next: "execute" }] },
  ],
};

const labels = () =>
  [...screen.getByTestId("piece-graph").querySelectorAll('[data-testid="piece-edge"] text')].map((t) => ({
    text: t.textContent ?? "",
    x: Number(t.getAttribute("x")),
    y: Number(t.getAttribute("y")),
    end: t.getAttribute("text-anchor") === "end",
  }));

const viewWidth = () => Number(screen.getByTestId("piece-graph").getAttribute("viewBox")?.split(" ")[2]);

// narrow makes matchMedia say the screen is below 640 px (or not).
function narrow(on: boolean) {
  vi.stubGlobal("matchMedia", (q: string) => ({ matches: on && q.includes("max-width"), media: q, addEventListener: () => undefined, removeEventListener: () => undefined }));
}

afterEach(() => vi.unstubAllGlobals());

describe("PieceGraph", () => {
  // A rule and a default_next to the same movement had their labels drawn
  // on the same spot ("the deliverable is fini…" over "default_next").
  it("puts no label over another", () => {
    narrow(false);
    render(<PieceGraph piece={piece} onSelect={() => undefined} />);
    const ls = labels();
    expect(ls.map((l) => l.text.slice(0, 19))).toEqual(["the deliverable is ", "default_next", "the deliverable has"]);
    for (const a of ls)
      for (const b of ls) if (a !== b && a.end === b.end) expect(Math.abs(a.y - b.y), `${a.text} / ${b.text}`).toBeGreaterThanOrEqual(12);
  });

  // At 390 px the wide layout (560 units) was scaled to about half its
  // size; the narrow one is at most 380 units wide (about its size in a
  // phone's card), and every label, cut to fit, lies inside it.
  it("lays out narrow on a phone, every label inside the graph", () => {
    narrow(true);
    render(<PieceGraph piece={piece} onSelect={() => undefined} />);
    const w = viewWidth();
    expect(w).toBeLessThanOrEqual(380);
    for (const l of labels()) {
      const len = l.text.length * 6;
      expect(l.end ? l.x - len : l.x + len, l.text).toBeGreaterThanOrEqual(0);
      expect(l.end ? l.x - len : l.x + len, l.text).toBeLessThanOrEqual(w);
    }
  });

  // A movement's name ran out of its box (and off the graph at 390 px):
  // it is cut to fit the box, the whole name its accessible name.
  it("cuts a long movement name to its box, the whole name its accessible name", () => {
    const long = "implement-the-feature-and-its-tests-then-update-the-docs";
    for (const on of [false, true]) {
      narrow(on);
      const { unmount } = render(
        <PieceGraph piece={{ name: "p", initial_movement: long, movements: [{ name: long }, { name: "short" }] }} onSelect={() => undefined} />,
      );
      const node = screen.getByTestId("piece-graph").querySelector(`[data-name="${long}"]`)!;
      const box = Number(node.querySelector("rect")!.getAttribute("width"));
      const text = node.querySelector("text")!;
      const font = Number(text.getAttribute("font-size"));
      expect(text.textContent!.length * font * 0.6, text.textContent!).toBeLessThanOrEqual(box);
      // Whole words of the name, so that what is shown is part of the
      // accessible name.
      expect(text.textContent).toBe(on ? "▶ implement-the…" : "▶ implement-the-feature…");
      expect(screen.getByRole("button", { name: `Movement ${long}` })).toBe(node);
      const short = screen.getByTestId("piece-graph").querySelector('[data-name="short"]')!;
      expect(short.querySelector("text")!.textContent).toBe("short");
      unmount();
    }
  });
});
