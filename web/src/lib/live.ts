// The headless protocol over HTTP + SSE for the web UI's live sessions
// (docs/remote-attach.md; wire contract §11). The event stream is read with
// fetch (EventSource cannot send the Authorization header) through the same
// SSE parser as the job log; each frame's data is one envelope: snapshot,
// message (with its cursor), heartbeat or reset.
import type { Api } from "../api/client";
import { ApiError, reach } from "../api/client";
import type { JobEvent } from "../api/types";
import { authHeaders } from "../api/auth";
import { LogModel, type Item } from "./eventlog";
import { SSEParser } from "./sse";

type Rec = Record<string, unknown>;
const str = (v: unknown): string => (typeof v === "string" ? v : "");

export type Role = "controller" | "viewer";

// PendingRequest is a server request waiting for this client's answer:
// approval, user_input or tool_retry (protocol.md, "Server requests").
export interface PendingRequest {
  requestId: string;
  type: string;
  callId: string;
  tool: string;
  label: string;
  description: string;
  args: unknown;
}

// Snapshot is the part of a runtime snapshot the UI reads.
export interface Snapshot {
  session_id: string;
  cursor: number;
  state: {
    model?: string;
    provider?: string;
    cwd?: string;
    is_ready?: boolean;
    is_responding?: boolean;
    connection_count?: number;
    subscriber_count?: number;
    controller_connection_id?: string | null;
    pending_requests?: Rec[];
    last_status?: string;
    [k: string]: unknown;
  };
  last_init?: { approval_mode?: string; thinking_level?: string } | null;
}

export interface Subscription {
  connection_id: string;
  subscription_id: string;
  role: Role;
  controller_lease_granted: boolean;
  controller_connection_id: string | null;
  lease_expires_at: string | null;
  snapshot: Snapshot;
}

// headless sends one request to /api/headless/… with the stored token and
// returns the JSON answer; a failure throws an ApiError carrying the
// contract's error text.
export async function headless<T>(
  api: Api,
  method: "GET" | "POST",
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<T> {
  const f = api.opts.fetch ?? fetch;
  const url = new URL(path, api.opts.baseUrl || window.location.origin);
  const h: Record<string, string> = { ...headers, ...authHeaders(api.opts.getToken()) };
  if (body !== undefined) h["Content-Type"] = "application/json";
  // reach: no answer at all says so in words (The server does not answer:
  // is maestro serve running?), not the browser's bare "Failed to fetch".
  const res = await reach(
    f,
    new Request(url, { method, headers: h, body: body === undefined ? undefined : JSON.stringify(body) }),
  );
  if (res.status === 401) api.opts.onUnauthorized();
  let data: unknown;
  try {
    data = await res.json();
  } catch {
    data = undefined;
  }
  if (!res.ok) {
    const d = (data ?? {}) as Rec;
    const msg = str(d.error) || str(d.message) || `${res.status} ${res.statusText}`;
    throw new ApiError(res.status, { error: msg } as never, msg);
  }
  return data as T;
}

// uploadAttachment sends a file to POST …/attachments as the controller's
// subscription (docs/remote-attach.md, "Attachments") and returns the
// stored path, relative to the session's workspace, for a prompt's
// attachments.
export async function uploadAttachment(api: Api, sessionId: string, subscriptionId: string, file: File): Promise<string> {
  const f = api.opts.fetch ?? fetch;
  const url = new URL(`/api/headless/sessions/${encodeURIComponent(sessionId)}/attachments`, api.opts.baseUrl || window.location.origin);
  url.searchParams.set("name", file.name);
  const res = await reach(
    f,
    new Request(url, {
      method: "POST",
      headers: {
        "Content-Type": "application/octet-stream",
        "x-maestro-headless-subscriber-id": subscriptionId,
        ...authHeaders(api.opts.getToken()),
      },
      body: file,
    }),
  );
  if (res.status === 401) api.opts.onUnauthorized();
  const data = ((await res.json().catch(() => undefined)) ?? {}) as Rec;
  if (!res.ok) {
    const msg = `${file.name}: ${str(data.error) || str(data.message) || `${res.status} ${res.statusText}`}`;
    throw new ApiError(res.status, { error: msg } as never, msg);
  }
  return str(data.path);
}

// pendingFrom reads a snapshot's pending requests.
export function pendingFrom(snap: Snapshot | undefined): PendingRequest[] {
  const out: PendingRequest[] = [];
  for (const p of snap?.state.pending_requests ?? []) {
    out.push({
      requestId: str(p.request_id) || str(p.id),
      type: str(p.kind),
      callId: str(p.call_id),
      tool: str(p.tool) || str(p.tool_name),
      label: str(p.summary_label) || str(p.display_name),
      description: str(p.action_description),
      args: p.args,
    });
  }
  return out;
}

// LiveModel applies envelopes in cursor order (wire contract §13: an
// envelope applies only when its cursor is greater than the last applied;
// a reset starts afresh from its snapshot). Protocol messages are drawn as
// the task log draws them (LogModel); server requests are kept apart as
// the dialogs' queue.
export class LiveModel {
  log = new LogModel();
  cursor = 0;
  count = 0;
  dupes = 0;
  snapshot: Snapshot | undefined;
  pending: PendingRequest[] = [];
  resets: { reason: string; cursor: number }[] = [];
  controllerConnectionId: string | null | undefined;
  responding = false;
  private seq = 0;

  private item(label: string, type: string, data: unknown): void {
    this.log.mark({ kind: "other", id: ++this.seq, type, label, data } as Item);
  }

  // seed takes the subscription's snapshot without its cursor, so that the
  // first stream replays the ring from cursor 0: an attaching client sees
  // the conversation so far (or a replay_gap reset when the ring no longer
  // holds its start).
  seed(snap: Snapshot): void {
    this.snapshot = snap;
    this.pending = pendingFrom(snap);
    this.controllerConnectionId = snap.state.controller_connection_id ?? null;
    this.responding = snap.state.is_responding === true;
  }

  // resubscribed takes the snapshot of a subscription made again after the
  // last one expired or vanished. A new subscription starts at its
  // snapshot and ignores the stream's cursor (remote-attach.md): frames
  // after the last applied cursor and up to the snapshot's were never
  // delivered, so this is a replay gap and is shown as one.
  resubscribed(snap: Snapshot): void {
    if (this.cursor === 0) {
      this.seed(snap);
      return;
    }
    if (snap.cursor > this.cursor) this.apply({ type: "reset", reason: "replay_gap", snapshot: snap });
  }

  apply(env: Rec): void {
    const t = str(env.type);
    if (t === "heartbeat") return;
    if (t === "snapshot" || t === "reset") {
      const snap = env.snapshot as Snapshot | undefined;
      if (!snap) return;
      const reason = str(env.reason);
      // A reset replaces the state whatever its cursor (remote-attach.md,
      // "Restore"); a published snapshot obeys the cursor rule.
      if (t === "snapshot" && snap.cursor <= this.cursor && this.cursor > 0) {
        this.dupes++;
        return;
      }
      this.snapshot = snap;
      this.cursor = Math.max(this.cursor, snap.cursor);
      if (t === "reset") this.cursor = snap.cursor;
      this.pending = pendingFrom(snap);
      this.controllerConnectionId = snap.state.controller_connection_id ?? null;
      this.responding = snap.state.is_responding === true;
      if (t === "reset") {
        this.resets.push({ reason, cursor: snap.cursor });
        this.item(`reset (${reason}): frames before cursor ${snap.cursor} were not replayed; state restored from a snapshot`, "reset", env);
      }
      return;
    }
    if (t !== "message") return;
    const cursor = typeof env.cursor === "number" ? env.cursor : 0;
    if (cursor <= this.cursor) {
      this.dupes++;
      return;
    }
    this.cursor = cursor;
    this.count++;
    const m = (env.message ?? {}) as Rec;
    this.message(cursor, m);
  }

  private message(cursor: number, m: Rec): void {
    const t = str(m.type);
    this.seq = Math.max(this.seq, cursor);
    switch (t) {
      case "server_request": {
        const p: PendingRequest = {
          requestId: str(m.request_id),
          type: str(m.request_type),
          callId: str(m.call_id),
          tool: str(m.tool),
          label: str(m.summary_label) || str(m.display_name),
          description: str(m.action_description),
          args: m.args,
        };
        this.pending = [...this.pending.filter((x) => x.requestId !== p.requestId), p];
        this.item(`${p.type} requested: ${p.label || p.tool}`, t, m);
        return;
      }
      case "server_request_resolved": {
        const id = str(m.request_id);
        this.pending = this.pending.filter((x) => x.requestId !== id);
        const reason = str(m.reason);
        this.item(
          `${str(m.request_type)} ${str(m.resolution)} by ${str(m.resolved_by)}${reason ? `: ${reason}` : ""}`,
          t,
          m,
        );
        return;
      }
      case "connection_info":
        if ("controller_connection_id" in m) this.controllerConnectionId = (m.controller_connection_id as string | null) ?? null;
        return;
      case "response_start":
        this.responding = true;
        break;
      case "error":
        this.responding = false;
        this.item(`error: ${str(m.message)}`, t, m);
        return;
      case "status":
        this.item(`status: ${str(m.message)}`, t, m);
        return;
      case "heartbeat":
      case "hello_ok":
        return;
    }
    if (t === "response_end") this.responding = false;
    const ev = { seq: cursor, type: "protocol", data: m } as unknown as JobEvent;
    this.log.add(ev);
  }
}

// streamEnvelopes reads GET …/events once and hands every envelope to
// onEnvelope; it resolves when the stream ends or drops, with the HTTP
// status of the answer (0 when the connection failed).
export async function streamEnvelopes(
  api: Api,
  sessionId: string,
  query: string,
  signal: AbortSignal,
  onOpen: () => void,
  onEnvelope: (env: Rec) => void,
): Promise<number> {
  const f = api.opts.fetch ?? fetch;
  const url = new URL(`/api/headless/sessions/${encodeURIComponent(sessionId)}/events?${query}`, api.opts.baseUrl || window.location.origin);
  let res: Response;
  try {
    res = await f(new Request(url, { headers: { Accept: "text/event-stream", ...authHeaders(api.opts.getToken()) }, signal, cache: "no-store" }));
  } catch {
    return 0;
  }
  if (res.status === 401) api.opts.onUnauthorized();
  if (!res.ok || !res.body) return res.status;
  onOpen();
  const parser = new SSEParser();
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      for (const m of parser.feed(value)) {
        try {
          onEnvelope(JSON.parse(m.data) as Rec);
        } catch {
          // not an envelope: skip
        }
      }
    }
  } catch {
    // dropped
  }
  return res.status;
}
