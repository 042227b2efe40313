import { useEffect, useRef, useState } from "react";
import { useApi } from "../api/context";
import { authHeaders } from "../api/auth";
import type { JobEvent } from "../api/types";
import { EventLog, LogModel, type Item, type Movement } from "./eventlog";
import { follow, type SSEMessage } from "./sse";

export interface JobLogView {
  items: Item[];
  movements: Movement[];
  totalCost: number;
  executor: string | undefined;
  model: string | undefined;
  count: number;
  lastId: number;
  gaps: number;
  dupes: number;
  connected: boolean;
  ended: { state: string; last_seq: number } | undefined;
}

const empty: JobLogView = {
  items: [],
  movements: [],
  totalCost: 0,
  executor: undefined,
  model: undefined,
  count: 0,
  lastId: 0,
  gaps: 0,
  dupes: 0,
  connected: false,
  ended: undefined,
};

// applyMessages feeds SSE messages into the log and the model; it returns the
// `end` payload when the stream ended. Separate from the hook so tests drive
// it directly.
export function applyMessages(
  log: EventLog,
  model: LogModel,
  msgs: SSEMessage[],
): { state: string; last_seq: number } | undefined {
  let end: { state: string; last_seq: number } | undefined;
  for (const m of msgs) {
    if (m.event === "end") {
      try {
        end = JSON.parse(m.data) as { state: string; last_seq: number };
      } catch {
        end = { state: "", last_seq: log.lastId };
      }
      continue;
    }
    if (m.event === "error" || m.id === undefined) continue;
    const id = Number(m.id);
    if (!Number.isSafeInteger(id)) continue;
    let ev: JobEvent;
    try {
      ev = JSON.parse(m.data) as JobEvent;
    } catch {
      continue;
    }
    if (log.add(id, ev)) model.add(ev);
  }
  return end;
}

// useJobLog follows GET /api/v1/jobs/{id}/events over SSE, resuming after a
// drop from the last id it kept (Last-Event-ID), until the job ends.
export function useJobLog(jobId: number | undefined): JobLogView {
  const api = useApi();
  const [view, setView] = useState<JobLogView>(empty);
  const ref = useRef<{ log: EventLog; model: LogModel } | null>(null);

  useEffect(() => {
    if (!jobId) return;
    const log = new EventLog();
    const model = new LogModel();
    ref.current = { log, model };
    setView(empty);
    const ctl = new AbortController();
    let connected = false;
    let ended: JobLogView["ended"];
    const publish = () =>
      setView({
        items: model.items.slice(),
        movements: model.movements.map((m) => ({ ...m })),
        totalCost: model.totalCost,
        executor: model.executor,
        model: model.model,
        count: log.events.length,
        lastId: log.lastId,
        gaps: log.gaps,
        dupes: log.dupes,
        connected,
        ended,
      });
    void follow({
      url: `${api.opts.baseUrl ?? ""}/api/v1/jobs/${jobId}/events`,
      fetch: api.opts.fetch,
      headers: () => authHeaders(api.opts.getToken()),
      cursor: () => log.lastId,
      signal: ctl.signal,
      onUnauthorized: api.opts.onUnauthorized,
      onConnected: (c) => {
        connected = c;
        if (!ctl.signal.aborted) publish();
      },
      onMessages: (msgs) => {
        const end = applyMessages(log, model, msgs);
        if (end) ended = end;
        if (!ctl.signal.aborted) publish();
      },
    });
    return () => ctl.abort();
  }, [api, jobId]);

  return view;
}
