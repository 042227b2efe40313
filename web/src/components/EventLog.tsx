import { memo, useEffect, useRef, useState } from "react";
import { useVirtualizer } from "@tanstack/react-virtual";
import type { Item } from "../lib/eventlog";
import type { JobLogView } from "../lib/useJobLog";
import { Markdown } from "./Markdown";
import { StatusBadge } from "./Badges";

// EventLogView draws the job's log as a virtualized list (only the rows in
// view are in the DOM, so 10,000 events scroll smoothly). The container's
// data-* attributes expose the stream's counters (DOM contract): events
// kept, last id, gaps, duplicates dropped, connection state.
//
// announce (default true) makes the connection label ("● live") a live
// region; a page that announces the connection itself (a live session's
// header) passes false, or a reconnect was read out twice.
export function EventLogView({ log, announce = true }: { log: JobLogView; announce?: boolean }) {
  const parent = useRef<HTMLDivElement>(null);
  const [follow, setFollow] = useState(true);
  const lastTop = useRef(0);
  const v = useVirtualizer({
    count: log.items.length,
    getScrollElement: () => parent.current,
    estimateSize: () => 36,
    overscan: 8,
    getItemKey: (i) => log.items[i]?.id ?? i,
  });

  // Stick to the bottom while the user has not scrolled up.
  useEffect(() => {
    if (follow && log.items.length > 0) v.scrollToIndex(log.items.length - 1, { align: "end" });
  }, [follow, log.items.length, v]);

  return (
    <div>
      <div className="mb-1 flex flex-wrap items-center gap-3 text-xs text-slate-600 dark:text-slate-400">
        <span aria-live={announce ? "polite" : undefined} data-testid="event-log-state">
          {/* Before the first event it connects: "reconnecting…" on
              opening a page said a connection had dropped. */}
          {log.connected ? "● live" : log.ended ? (log.ended.state === "ended" ? "ended" : `ended: ${log.ended.state}`) : log.lastId > 0 ? "○ reconnecting…" : "○ connecting…"}
        </span>
        <span>{log.count} events</span>
        {log.gaps > 0 && <span className="text-amber-700 dark:text-amber-300">{log.gaps} gap(s)</span>}
        <label className="ml-auto flex items-center gap-1">
          <input type="checkbox" data-testid="log-follow" checked={follow} onChange={(e) => setFollow(e.target.checked)} />
          Follow
        </label>
      </div>
      <div
        ref={parent}
        data-testid="event-log"
        data-count={log.count}
        data-last-id={log.lastId}
        data-gaps={log.gaps}
        data-dupes={log.dupes}
        data-connected={log.connected ? "true" : "false"}
        role="log"
        aria-label="Live log"
        // A log is a live region: each row added is read out. Rows are
        // added as the list is scrolled too (only those in view are in the
        // DOM), so while the reader scrolls back (Follow off) old events
        // were read out as if new. Only a log that follows speaks.
        aria-live={follow ? "polite" : "off"}
        tabIndex={0}
        onWheel={(e) => {
          if (e.deltaY < 0) setFollow(false);
        }}
        // Scrolling up with the keyboard stops following too: only the
        // wheel did, and each new event took a keyboard user reading
        // back (↑, Page Up, Home) to the bottom again.
        // So does any other way up: a touch swipe (a phone) or a drag of
        // the scrollbar sends no wheel event and no key, and each new
        // event took the reader back to the bottom. A move up that leaves
        // the view at the bottom (rows measured shorter than estimated,
        // the browser pulling the view to the new end) is not the user's.
        onScroll={(e) => {
          const el = e.currentTarget;
          const up = el.scrollTop < lastTop.current;
          lastTop.current = el.scrollTop;
          if (up && el.scrollHeight - el.clientHeight - el.scrollTop > 40) setFollow(false);
        }}
        // A row taking the focus (Tab to a tool call's summary) stops
        // following: the log went on to its end and the focused row, out
        // of view, left the DOM (only rows in view are drawn), the focus
        // with it, on <body>.
        onFocus={(e) => {
          if (e.target !== e.currentTarget) setFollow(false);
        }}
        onKeyDown={(e) => {
          if (e.key === "ArrowUp" || e.key === "PageUp" || e.key === "Home" || (e.key === " " && e.shiftKey)) setFollow(false);
        }}
        className="h-[60vh] overflow-auto rounded-lg border border-slate-200 bg-white dark:border-slate-800 dark:bg-slate-900"
      >
        <div className="relative w-full" ref={(el) => el?.style.setProperty("height", `${v.getTotalSize()}px`)}>
          {v.getVirtualItems().map((row) => {
            const item = log.items[row.index];
            if (!item) return null;
            return (
              <div
                key={row.key}
                data-index={row.index}
                ref={(el) => {
                  if (!el) return;
                  el.style.setProperty("transform", `translateY(${row.start}px)`);
                  v.measureElement(el);
                }}
                className="absolute top-0 left-0 w-full border-b border-slate-100 px-3 py-1.5 wrap-anywhere dark:border-slate-800"
              >
                <LogItem item={item} />
              </div>
            );
          })}
        </div>
      </div>
    </div>
  );
}

export const LogItem = memo(function LogItem({ item }: { item: Item }) {
  const common = { "data-testid": "event-item", "data-id": item.id, "data-kind": item.kind };
  switch (item.kind) {
    case "text":
      if (item.thinking)
        return (
          <details {...common} className="text-sm text-slate-600 italic dark:text-slate-400">
            <summary className="cursor-pointer">∴ thinking</summary>
            <p className="bidi-auto whitespace-pre-wrap">{item.text}</p>
          </details>
        );
      return (
        <div {...common}>
          <Markdown text={item.text} />
        </div>
      );
    case "tool":
      return (
        <details {...common} className="text-sm">
          <summary className="cursor-pointer" data-testid="tool-call" data-tool={item.tool} data-status={item.status}>
            <span className="font-mono font-semibold">● {item.tool}</span>{" "}
            <span className="font-mono text-xs text-slate-600 dark:text-slate-400">{brief(item.args)}</span>{" "}
            <span
              className={
                item.status === "failed"
                  ? "text-red-700 dark:text-red-400"
                  : item.status === "succeeded"
                    ? "text-emerald-700 dark:text-emerald-400"
                    : "text-slate-600 dark:text-slate-400"
              }
            >
              {item.status === "failed" ? "✗ failed" : item.status === "succeeded" ? "✓" : `… ${item.status}`}
            </span>
            {item.error && <span className="ml-2 text-xs text-red-700 dark:text-red-400">{item.error}</span>}
          </summary>
          <div className="mt-1 space-y-1">
            <p className="text-xs font-semibold">Input</p>
            <pre tabIndex={0} className="max-h-60 overflow-auto rounded bg-slate-100 p-2 text-xs dark:bg-slate-800">
              {JSON.stringify(item.args, null, 2)}
            </pre>
            {item.output && (
              <>
                <p className="text-xs font-semibold">Output</p>
                <pre tabIndex={0} className="max-h-60 overflow-auto rounded bg-slate-100 p-2 text-xs dark:bg-slate-800">
                  {item.output}
                </pre>
              </>
            )}
          </div>
        </details>
      );
    case "movement":
      return (
        <h3 {...common} className="pt-2 text-sm font-bold text-sky-800 dark:text-sky-300">
          ▸ Movement {item.number}: {item.name}
        </h3>
      );
    case "status":
      return (
        <p {...common} className="text-xs whitespace-pre-wrap text-slate-600 dark:text-slate-400">
          #{item.id} status <StatusBadge state={item.state} /> attempt {item.attempt}
          {item.worker ? ` on ${item.worker}` : ""}
          {item.reason ? ` (${item.reason})` : ""}
          {item.error ? ` — ${item.error}` : ""}
        </p>
      );
    case "comment":
      return (
        <div {...common} className="text-sm">
          <span className="font-semibold">{item.author}:</span> <span className="bidi-auto whitespace-pre-wrap">{item.body}</span>
        </div>
      );
    case "result":
      return (
        // Green only for success: an aborted run's result ("I cannot go
        // on") had the success's green frame.
        <div
          {...common}
          data-status={item.status}
          className={`rounded border p-2 ${
            item.status === "success"
              ? "border-emerald-300 dark:border-emerald-700"
              : item.status === "needs_user_input"
                ? "border-amber-400 dark:border-amber-600"
                : "border-red-300 dark:border-red-700"
          }`}
        >
          <p className="text-xs font-semibold">Result ({item.status})</p>
          <Markdown text={item.result} />
        </div>
      );
    case "usage":
      return null;
    default:
      return (
        <p {...common} className="text-xs text-slate-600 dark:text-slate-400">
          #{item.id} {item.label}
        </p>
      );
  }
});

function brief(args: unknown): string {
  if (!args || typeof args !== "object") return "";
  const a = args as Record<string, unknown>;
  const v = a.path ?? a.command ?? a.pattern ?? a.next ?? a.status ?? a.url ?? a.query;
  const s = typeof v === "string" ? v : "";
  return s.length > 80 ? `${s.slice(0, 77)}…` : s;
}
