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
// drop from the last id it kept (Last-Event-ID), until the job ends. When
// `finished` turns false again after the stream's end (the job was retried),
// it follows on from the same cursor: the log is kept, nothing is re-read.
export function useJobLog(jobId: number | undefined, finished = false): JobLogView {
  const api = useApi();
  const [view, setView] = useState<JobLogView>(empty);
  const ref = useRef<{ jobId: number; log: EventLog; model: LogModel; ended: JobLogView["ended"] } | null>(null);
  const [round, setRound] = useState(0);

  // Resume only once the caller has seen the job finished after the end and
  // then unfinished again (not while its view still lags behind the stream).
  const ended = view.ended !== undefined;
  const sawFinished = useRef(false);
  useEffect(() => {
    if (!ended) return;
    if (finished) sawFinished.current = true;
    else if (sawFinished.current && ref.current) {
      sawFinished.current = false;
      ref.current.ended = undefined;
      setRound((r) => r + 1);
    }
  }, [ended, finished]);

  useEffect(() => {
    if (!jobId) return;
    if (!ref.current || ref.current.jobId !== jobId) {
      ref.current = { jobId, log: new EventLog(), model: new LogModel(), ended: undefined };
      setView(empty);
    }
    const st = ref.current;
    const { log, model } = st;
    const ctl = new AbortController();
    let connected = false;
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
        ended: st.ended,
      });
    // A burst of chunks (a long log read at once) renders once per 50 ms,
    // not once per chunk.
    let timer: ReturnType<typeof setTimeout> | undefined;
    const schedule = () => {
      if (timer !== undefined || ctl.signal.aborted) return;
      timer = setTimeout(() => {
        timer = undefined;
        if (!ctl.signal.aborted) publish();
      }, 50);
    };
    void follow({
      url: `${api.opts.baseUrl ?? ""}/api/v1/jobs/${jobId}/events`,
      fetch: api.opts.fetch,
      headers: () => authHeaders(api.opts.getToken()),
      cursor: () => log.lastId,
      signal: ctl.signal,
      onUnauthorized: api.opts.onUnauthorized,
      onConnected: (c) => {
        connected = c;
        schedule();
      },
      onMessages: (msgs) => {
        const end = applyMessages(log, model, msgs);
        if (end) st.ended = end;
        schedule();
      },
    });
    return () => {
      ctl.abort();
      clearTimeout(timer);
    };
  }, [api, jobId, round]);

  return view;
}
