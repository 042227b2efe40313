import { describe, expect, it } from "vitest";
import { didYouMean, lineDiff, pieceGraph, END } from "./piecegraph";

describe("pieceGraph", () => {
  it("draws rules, default_next, WAIT_SUBTASKS and the complete tool's end, initial movement first", () => {
    const g = pieceGraph({
      name: "p",
      initial_movement: "plan",
      movements: [
        { name: "code", rules: [{ condition: "done", next: "review" }, { condition: "split", next: "WAIT_SUBTASKS" }] },
        { name: "plan", rules: [{ condition: "ready", next: "code" }], default_next: "ABORT" },
        { name: "review", rules: [] },
      ],
    });
    expect(g.nodes.map((n) => n.id)).toEqual(["plan", "code", "review", "WAIT_SUBTASKS", "ABORT", END]);
    expect(g.edges).toContainEqual({ from: "plan", to: "ABORT", kind: "default", label: "default_next" });
    expect(g.edges).toContainEqual({ from: "code", to: "WAIT_SUBTASKS", kind: "rule", label: "split" });
    expect(g.edges.filter((e) => e.kind === "complete").map((e) => e.from)).toEqual(["plan", "code", "review"]);
  });
});

describe("lineDiff", () => {
  it("keeps common lines and marks removed and added ones", () => {
    expect(lineDiff("a\nb\nc", "a\nx\nc")).toEqual([
      { op: " ", text: "a" },
      { op: "-", text: "b" },
      { op: "+", text: "x" },
      { op: " ", text: "c" },
    ]);
  });
});

describe("didYouMean", () => {
  it("reads the validator's suggestion", () => {
    expect(didYouMean('expected a movement name (plan), found "plna"; did you mean "plan"?')).toBe("plan");
    expect(didYouMean("required field is missing")).toBeUndefined();
  });
});
