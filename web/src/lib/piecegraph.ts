// The graph of a piece (docs/pieces.md): its movements and the
// transitions between them: each rule's next (a movement or
// WAIT_SUBTASKS), default_next (a movement or any sentinel), and the
// terminal sentinels every movement reaches through the complete tool.

export interface Movement {
  name: string;
  persona?: string;
  instruction?: string;
  edit?: boolean;
  agent?: string;
  model?: string;
  allowed_tools?: string[] | null;
  rules?: { condition: string; next: string }[] | null;
  default_next?: string;
}

export interface ParsedPiece {
  name: string;
  initial_movement?: string;
  movements: Movement[];
}

export type EdgeKind = "rule" | "default" | "complete";

export interface Edge {
  from: string;
  to: string;
  kind: EdgeKind;
  label: string;
}

export const sentinels = ["WAIT_SUBTASKS", "COMPLETE", "ABORT", "ASK"] as const;
// The run ends through the complete tool, from any movement.
export const END = "END";

export interface Graph {
  // Movements, the initial one first, then the sentinels that edges reach.
  nodes: { id: string; sentinel: boolean }[];
  edges: Edge[];
}

export function pieceGraph(p: ParsedPiece): Graph {
  const ms = [...p.movements];
  const first = ms.findIndex((m) => m.name === p.initial_movement);
  if (first > 0) ms.unshift(...ms.splice(first, 1));
  const edges: Edge[] = [];
  for (const m of ms) {
    for (const r of m.rules ?? []) edges.push({ from: m.name, to: r.next, kind: "rule", label: r.condition });
    if (m.default_next) edges.push({ from: m.name, to: m.default_next, kind: "default", label: "default_next" });
    edges.push({ from: m.name, to: END, kind: "complete", label: "complete" });
  }
  const names = new Set(ms.map((m) => m.name));
  const used = new Set(edges.map((e) => e.to).filter((t) => !names.has(t)));
  const extra = [...sentinels.filter((s) => used.has(s)), ...[...used].filter((t) => t !== END && !(sentinels as readonly string[]).includes(t))];
  return {
    nodes: [...ms.map((m) => ({ id: m.name, sentinel: false })), ...extra.map((id) => ({ id, sentinel: true })), { id: END, sentinel: true }],
    edges,
  };
}

// lineDiff is a line diff of a against b (longest common subsequence):
// each line kept (" "), removed from a ("-") or added in b ("+").
export function lineDiff(a: string, b: string): { op: " " | "-" | "+"; text: string }[] {
  const x = a.split("\n");
  const y = b.split("\n");
  const n = x.length;
  const m = y.length;
  // lcs[i*(m+1)+j]: the longest common subsequence of x[i:] and y[j:].
  const lcs = new Uint32Array((n + 1) * (m + 1));
  const at = (i: number, j: number) => lcs[i * (m + 1) + j]!;
  for (let i = n - 1; i >= 0; i--)
    for (let j = m - 1; j >= 0; j--) lcs[i * (m + 1) + j] = x[i] === y[j] ? at(i + 1, j + 1) + 1 : Math.max(at(i + 1, j), at(i, j + 1));
  const out: { op: " " | "-" | "+"; text: string }[] = [];
  let i = 0;
  let j = 0;
  while (i < n && j < m) {
    if (x[i] === y[j]) {
      out.push({ op: " ", text: x[i]! });
      i++;
      j++;
    } else if (at(i + 1, j) >= at(i, j + 1)) out.push({ op: "-", text: x[i++]! });
    else out.push({ op: "+", text: y[j++]! });
  }
  while (i < n) out.push({ op: "-", text: x[i++]! });
  while (j < m) out.push({ op: "+", text: y[j++]! });
  return out;
}

// didYouMean returns the suggestion of a validator message ("…; did you
// mean "plan"?"), or undefined.
export function didYouMean(message: string): string | undefined {
  return /did you mean "([^"]+)"\?/.exec(message)?.[1];
}
