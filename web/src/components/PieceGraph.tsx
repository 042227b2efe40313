import { useEffect, useState } from "react";
import { END, pieceGraph, type ParsedPiece } from "../lib/piecegraph";

const H = 36; // node height
const GAP = 40; // vertical gap between nodes
const FONT = 10; // an edge label's font size
const CHAR = FONT * 0.6; // an edge label's character width, at most
const LINE = FONT + 3; // the least distance between two labels' baselines

// Two layouts: the wide one, and the one for a narrow screen (below
// Tailwind's sm, 640 px), which the graph fills at about its own size. The
// wide one there was scaled to half its size, its labels 5 px high.
const layouts = {
  // node width, nodes' left edge (room for backward arcs), room on the right, a node's font size
  wide: { W: 200, X: 170, right: 190, nodeFont: 13 },
  narrow: { W: 130, X: 120, right: 130, nodeFont: 12 },
};

const narrowQuery = "(max-width: 639px)";

// useNarrow reports whether the screen is narrower than Tailwind's sm.
function useNarrow(): boolean {
  const query = () => (typeof window.matchMedia === "function" ? window.matchMedia(narrowQuery) : undefined);
  const [narrow, setNarrow] = useState(() => query()?.matches ?? false);
  useEffect(() => {
    const mq = query();
    if (!mq) return;
    const on = () => setNarrow(mq.matches);
    on();
    mq.addEventListener("change", on);
    return () => mq.removeEventListener("change", on);
  }, []);
  return narrow;
}

// clip shortens a label to n characters at most (an ellipsis last).
function clip(label: string, n: number): string {
  return label.length > n ? label.slice(0, Math.max(1, n - 1)) + "…" : label;
}

// clipWords shortens a name to n characters at most as clip does, but
// after its last whole word (words end at "-", "_" or a space) when that
// keeps half of it: what is shown stays words of the name, which is the
// node's accessible name (a cut word is not part of it, to axe).
function clipWords(label: string, n: number): string {
  if (label.length <= n) return label;
  const head = label.slice(0, n); // a separator at n-1 ends a whole word
  const end = Math.max(head.lastIndexOf("-"), head.lastIndexOf("_"), head.lastIndexOf(" "));
  return label.slice(0, end >= n / 2 ? end : Math.max(1, n - 1)) + "…";
}

// PieceGraph draws a piece's movements top to bottom (the initial one
// first), the sentinels below them, and the transitions as arcs: forward
// ones on the right, backward ones on the left. A movement is a button:
// clicking it selects it. An edge's label is cut to fit the graph, and put
// below any label it would cover (a rule and a default_next to the same
// movement were drawn over each other); the full label is its title. A
// node's name is cut to fit its box in the same way (a long one ran out of
// the box and off the graph): clicking the movement shows its whole name,
// which is also its accessible name.
export function PieceGraph({ piece, selected, onSelect }: { piece: ParsedPiece; selected?: string; onSelect: (name: string) => void }) {
  const { W, X, right, nodeFont } = layouts[useNarrow() ? "narrow" : "wide"];
  const g = pieceGraph(piece);
  const index = new Map(g.nodes.map((n, i) => [n.id, i]));
  const y = (i: number) => 10 + i * (H + GAP);
  const height = y(g.nodes.length);
  const width = X + W + right;
  const placed: { forward: boolean; y: number }[] = []; // the labels so far
  const moved = new Map<number, number>(); // arcs per span, to spread them
  return (
    <svg
      role="group"
      aria-label={`Graph of piece ${piece.name}: ${g.nodes.length} nodes, ${g.edges.length} transitions`}
      data-testid="piece-graph"
      viewBox={`0 0 ${width} ${height}`}
      className="w-full max-w-xl"
    >
      <defs>
        <marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse">
          <path d="M0,0 L10,5 L0,10 z" className="fill-slate-500" />
        </marker>
      </defs>
      {g.edges.map((e, k) => {
        const a = index.get(e.from);
        const b = index.get(e.to);
        if (a === undefined || b === undefined) return null;
        const span = b - a;
        const n = (moved.get(span) ?? 0) + 1;
        moved.set(span, n);
        const forward = span > 0;
        const x0 = forward ? X + W : X;
        const y0 = y(a) + H / 2 + (forward ? 6 : -6);
        const y1 = y(b) + H / 2 + (forward ? -6 : 6);
        const bend = (forward ? 1 : -1) * (30 + Math.abs(span) * 18 + n * 8);
        const d = span === 0 ? `M${X + W},${y0 - 10} C${X + W + 50},${y0 - 30} ${X + W + 50},${y0 + 20} ${X + W},${y0 + 4}` : `M${x0},${y0} C${x0 + bend},${y0} ${x0 + bend},${y1} ${x0},${y1}`;
        const dashed = e.kind !== "rule";
        const lx = x0 + bend * 0.75;
        let ly = (y0 + y1) / 2;
        if (e.kind !== "complete") {
          while (placed.some((p) => p.forward === forward && Math.abs(p.y - ly) < LINE)) ly += LINE;
          placed.push({ forward, y: ly });
        }
        const room = forward ? width - lx - 2 : lx - 2;
        return (
          <g key={k} data-testid="piece-edge" data-from={e.from} data-to={e.to} data-kind={e.kind}>
            <path d={d} fill="none" className={e.kind === "complete" ? "stroke-slate-300 dark:stroke-slate-600" : "stroke-slate-500"} strokeWidth={1.5} strokeDasharray={dashed ? "4 3" : undefined} markerEnd="url(#arrow)">
              <title>{`${e.from} → ${e.to}: ${e.label}`}</title>
            </path>
            {e.kind !== "complete" && (
              <text x={lx} y={ly} fontSize={FONT} textAnchor={forward ? "start" : "end"} data-testid="piece-edge-label" className="fill-slate-600 dark:fill-slate-300">
                {clip(e.label, Math.min(24, Math.floor(room / CHAR)))}
              </text>
            )}
          </g>
        );
      })}
      {g.nodes.map((n, i) => {
        const sel = n.id === selected;
        const text = (i === 0 && !n.sentinel ? "▶ " : "") + (n.id === END ? "end (complete tool)" : n.id);
        const fits = Math.floor((W - 12) / (nodeFont * 0.6));
        return (
          <g
            key={n.id}
            data-testid={n.sentinel ? "piece-sentinel" : "piece-node"}
            data-name={n.id}
            role={n.sentinel ? undefined : "button"}
            tabIndex={n.sentinel ? undefined : 0}
            aria-label={n.sentinel ? undefined : `Movement ${n.id}`}
            aria-pressed={n.sentinel ? undefined : sel}
            className={n.sentinel ? "" : "cursor-pointer"}
            onClick={n.sentinel ? undefined : () => onSelect(n.id)}
            onKeyDown={
              n.sentinel
                ? undefined
                : (ev) => {
                    if (ev.key === "Enter" || ev.key === " ") {
                      ev.preventDefault();
                      onSelect(n.id);
                    }
                  }
            }
          >
            <rect
              x={X}
              y={y(i)}
              width={W}
              height={H}
              rx={n.sentinel ? 18 : 6}
              className={
                n.sentinel
                  ? "fill-slate-100 stroke-slate-400 dark:fill-slate-800"
                  : sel
                    ? "fill-sky-100 stroke-sky-700 dark:fill-sky-900"
                    : "fill-white stroke-slate-500 dark:fill-slate-900"
              }
              strokeWidth={sel ? 2.5 : 1.5}
            />
            <text x={X + W / 2} y={y(i) + H / 2 + 4} textAnchor="middle" fontSize={nodeFont} className="fill-slate-900 dark:fill-slate-100">
              {clipWords(text, fits)}
            </text>
          </g>
        );
      })}
    </svg>
  );
}
