import type { JobEvent } from "../api/types";

// EventLog keeps a job's events as the SSE stream delivers them, de-duplicated
// by id. Ids are the events' sequence numbers, 1, 2, 3… with no gaps
// (docs/api.md, "Event stream (SSE)"), so anything at or below the last id is
// a duplicate (dropped and counted) and a jump is a gap (counted; the event
// is kept). lastId is the cursor a reconnect sends as Last-Event-ID.
export class EventLog {
  readonly events: JobEvent[] = [];
  lastId = 0;
  gaps = 0;
  dupes = 0;

  // add records one event; it returns false for a duplicate.
  add(id: number, ev: JobEvent): boolean {
    if (id <= this.lastId) {
      this.dupes++;
      return false;
    }
    if (id !== this.lastId + 1) this.gaps++;
    this.lastId = id;
    this.events.push(ev);
    return true;
  }
}

// Item is one rendered entry of the log: consecutive streamed text of one
// response, one tool call with everything about it, a movement header, a
// status change, a comment, or any other event shown as it is.
export type Item =
  | { kind: "text"; id: number; responseId: string; text: string; thinking: boolean }
  | {
      kind: "tool";
      id: number;
      callId: string;
      tool: string;
      args: unknown;
      output: string;
      status: "running" | "succeeded" | "failed" | "pending";
      error?: string;
    }
  | { kind: "movement"; id: number; name: string; number: number }
  | { kind: "status"; id: number; state: string; attempt: number; worker?: string; error?: string; reason?: string }
  | { kind: "comment"; id: number; author: string; body: string }
  | { kind: "usage"; id: number; usage: Usage }
  | { kind: "result"; id: number; status: string; result: string }
  | { kind: "other"; id: number; type: string; label: string; data: unknown };

export interface Usage {
  input_tokens?: number;
  output_tokens?: number;
  cache_read_tokens?: number;
  cache_write_tokens?: number;
  total_tokens?: number;
  total_cost_usd?: number;
  model_id?: string;
  provider?: string;
}

export interface Movement {
  id: number;
  name: string;
  number: number;
  inputTokens: number;
  outputTokens: number;
  cost: number;
  toolCalls: number;
  failed: number;
}

type Rec = Record<string, unknown>;
const str = (v: unknown): string => (typeof v === "string" ? v : "");
const num = (v: unknown): number => (typeof v === "number" ? v : 0);

// LogModel turns events into Items incrementally: streamed chunks append to
// their response's text item, tool events update their call's item. It keeps
// the per-movement usage for the timeline and the run's total.
export class LogModel {
  items: Item[] = [];
  movements: Movement[] = [];
  executor: string | undefined;
  model: string | undefined;
  private texts = new Map<string, number>();
  private tools = new Map<string, number>();
  private lastTextKey = "";

  get totalCost(): number {
    return this.movements.reduce((s, m) => s + m.cost, 0) + this.orphanCost;
  }
  private orphanCost = 0;
  // usage sums every response_end's usage: tokens and cost of the whole
  // log (responses counts the usage records summed).
  // provider is the last usage record's (an agent CLI's id on that executor).
  usage = { inputTokens: 0, outputTokens: 0, cacheTokens: 0, cost: 0, responses: 0, provider: "" };

  // mark appends an item that is not an event of the log (a live
  // session's reset, say): streamed text after it starts a new item, so
  // that no text seems to run across it.
  mark(item: Item): void {
    this.lastTextKey = "";
    this.items.push(item);
  }

  private movement(): Movement | undefined {
    return this.movements[this.movements.length - 1];
  }

  private replace(index: number, item: Item): void {
    this.items[index] = item;
  }

  add(ev: JobEvent): void {
    const d = (ev.data ?? {}) as Rec;
    switch (ev.type) {
      case "status":
        this.items.push({
          kind: "status",
          id: ev.seq,
          state: str(d.state),
          attempt: num(d.attempt),
          worker: str(d.worker) || undefined,
          error: str(d.error) || undefined,
          reason: str(d.reason) || undefined,
        });
        return;
      case "comment":
        this.items.push({
          kind: "comment",
          id: ev.seq,
          author: str(d.author_kind) || str(d.author) || "user",
          body: str(d.body),
        });
        return;
      case "run_event":
        this.runEvent(ev, d);
        return;
      case "protocol":
        this.protocol(ev, d);
        return;
      default:
        this.items.push({ kind: "other", id: ev.seq, type: ev.type, label: ev.type, data: d });
    }
  }

  private runEvent(ev: JobEvent, d: Rec): void {
    const kind = str(d.kind);
    const data = (d.data ?? {}) as Rec;
    if (kind === "movement_started") {
      const m: Movement = {
        id: ev.seq,
        name: str(data.movement),
        number: num(data.number) || this.movements.length + 1,
        inputTokens: 0,
        outputTokens: 0,
        cost: 0,
        toolCalls: 0,
        failed: 0,
      };
      this.movements.push(m);
      this.items.push({ kind: "movement", id: ev.seq, name: m.name, number: m.number });
      return;
    }
    if (kind === "complete") {
      this.items.push({ kind: "result", id: ev.seq, status: str(data.status), result: str(data.result) });
      return;
    }
    this.items.push({ kind: "other", id: ev.seq, type: kind, label: runEventLabel(kind, data), data });
  }

  private protocol(ev: JobEvent, d: Rec): void {
    const t = str(d.type);
    switch (t) {
      case "ready":
        this.executor = str(d.executor_type) || this.executor;
        this.model = [str(d.provider), str(d.model)].filter(Boolean).join("/") || this.model;
        this.items.push({ kind: "other", id: ev.seq, type: t, label: `ready: ${this.model ?? ""} (${this.executor ?? "?"})`, data: d });
        return;
      case "response_start":
        this.lastTextKey = "";
        return;
      case "response_chunk": {
        const thinking = d.is_thinking === true;
        const key = `${str(d.response_id)}:${thinking ? "t" : "x"}`;
        const at = this.texts.get(key);
        // Chunks join their response's last text item of the same kind as
        // long as nothing else came between them.
        if (at !== undefined && this.lastTextKey === key) {
          const it = this.items[at];
          if (it && it.kind === "text") this.replace(at, { ...it, text: it.text + str(d.content) });
          return;
        }
        this.texts.set(key, this.items.length);
        this.lastTextKey = key;
        this.items.push({ kind: "text", id: ev.seq, responseId: str(d.response_id), text: str(d.content), thinking });
        return;
      }
      case "response_end": {
        const u = (d.usage ?? {}) as Usage;
        this.usage = {
          inputTokens: this.usage.inputTokens + num(u.input_tokens),
          outputTokens: this.usage.outputTokens + num(u.output_tokens),
          cacheTokens: this.usage.cacheTokens + num(u.cache_read_tokens) + num(u.cache_write_tokens),
          cost: this.usage.cost + num(u.total_cost_usd),
          responses: this.usage.responses + 1,
          provider: str(u.provider) || this.usage.provider,
        };
        const m = this.movement();
        if (m) {
          m.inputTokens += num(u.input_tokens);
          m.outputTokens += num(u.output_tokens);
          m.cost += num(u.total_cost_usd);
        } else {
          this.orphanCost += num(u.total_cost_usd);
        }
        this.lastTextKey = "";
        return;
      }
      case "tool_call": {
        this.lastTextKey = "";
        const callId = str(d.call_id);
        this.tools.set(callId, this.items.length);
        const m = this.movement();
        if (m) m.toolCalls++;
        this.items.push({ kind: "tool", id: ev.seq, callId, tool: str(d.tool), args: d.args, output: "", status: "pending" });
        return;
      }
      case "tool_start":
      case "tool_output":
      case "tool_end": {
        const at = this.tools.get(str(d.call_id));
        const it = at === undefined ? undefined : this.items[at];
        if (at === undefined || !it || it.kind !== "tool") {
          this.items.push({ kind: "other", id: ev.seq, type: t, label: `${t} ${str(d.call_id)}`, data: d });
          return;
        }
        if (t === "tool_start") this.replace(at, { ...it, status: "running" });
        else if (t === "tool_output") this.replace(at, { ...it, output: it.output + str(d.content) });
        else {
          const ok = d.success === true;
          if (!ok) {
            const m = this.movement();
            if (m) m.failed++;
          }
          // The generic code "failed" (any other failure: a non-zero exit)
          // only repeated the status: "✗ failed failed". The output's last
          // line says more ("exit code 1"); a specific code stays.
          const code = str(d.error_code) === "failed" ? "" : str(d.error_code);
          const reason = str(d.error) || code || (ok ? undefined : (lastLine(it.output) ?? str(d.error_code))) || undefined;
          this.replace(at, { ...it, status: ok ? "succeeded" : "failed", error: ok ? undefined : reason });
        }
        return;
      }
      case "error": {
        // What went wrong is the message; the type says which kind of
        // error (cancelled, provider_error, …).
        const type = str(d.error_type);
        const label = `error${type ? ` (${type})` : ""}: ${str(d.message) || "no message"}`;
        this.items.push({ kind: "other", id: ev.seq, type: t, label, data: d });
        return;
      }
      default:
        this.items.push({ kind: "other", id: ev.seq, type: t || "protocol", label: t || "protocol", data: d });
    }
  }
}

// runEventLabel says in a line what a run event of the piece engine
// means, as `maestro tasks logs` does (the engine's Describe,
// internal/engine/events.go); an unknown kind is shown by its name.
export function runEventLabel(kind: string, data: Rec): string {
  const movement = str(data.movement);
  switch (kind) {
    case "run_started":
      return `piece ${str(data.piece)}: starting at ${str(data.initial_movement)} (at most ${num(data.max_movements)} movements)`;
    case "classified":
      return `piece ${str(data.piece)} (${str(data.reason)})`;
    case "transition":
      return `transition ${str(data.from)} » ${str(data.to)}`;
    case "waiting":
      return str(data.for) === "subtasks" ? `waiting for ${num(data.subtasks)} subtask(s)` : "waiting for an answer";
    case "resumed":
      return `run resumed at ${movement} (${str(data.entry)})`;
    case "tools_omitted": {
      const tools = Array.isArray(data.tools) ? (data.tools as Rec[]) : [];
      return `movement ${movement}: not offered: ${tools.map((t) => `${str(t.name)} (${str(t.reason)})`).join("; ")}`;
    }
    case "reminder":
      return `movement ${movement}: the model answered without transition or complete; reminder ${num(data.count)} of ${num(data.max)}`;
    case "lessons": {
      const added = Array.isArray(data.added) ? (data.added as unknown[]).map(str).join("; ") : "";
      return `lessons from ${movement}: ${added} (${num(data.total)} kept)`;
    }
    case "subtask_spawned":
      return `subtask ${num(data.id)} (${str(data.name)}, piece ${str(data.piece)}) spawned`;
    case "subtask_finished":
      return `subtask ${num(data.id)} (${str(data.name)}) ${str(data.status)}`;
    case "firewall_block":
      return (
        `movement ${movement}: ${str(data.tool)} refused ${str(data.url)}: ` +
        (str(data.class) === "scheme" ? "only http and https are fetched" : `${str(data.address)} is a ${str(data.class)} address`)
      );
  }
  return kind;
}

function lastLine(s: string): string | undefined {
  const lines = s.trimEnd().split("\n");
  return lines[lines.length - 1] || undefined;
}
