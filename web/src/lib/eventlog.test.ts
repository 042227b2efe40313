import { describe, expect, it } from "vitest";
import { EventLog, LogModel } from "./eventlog";
import { applyMessages } from "./useJobLog";
import { follow, SSEParser, type SSEMessage } from "./sse";
import type { JobEvent } from "../api/types";

function ev(seq: number, type = "status", data: Record<string, unknown> = { state: "running", attempt: 1 }): JobEvent {
  return { job_id: 7, seq, attempt: 1, type, data, created_at: "2026-11-26T12:00:00Z" };
}

function frame(seq: number, type = "status", data?: Record<string, unknown>): string {
  return `id: ${seq}\nevent: ${type}\ndata: ${JSON.stringify(ev(seq, type, data))}\n\n`;
}

describe("EventLog", () => {
  const cases: { name: string; ids: number[]; count: number; last: number; gaps: number; dupes: number }[] = [
    { name: "in order", ids: [1, 2, 3], count: 3, last: 3, gaps: 0, dupes: 0 },
    { name: "a replayed event is dropped", ids: [1, 2, 2, 3], count: 3, last: 3, gaps: 0, dupes: 1 },
    { name: "an old event after a reconnect is dropped", ids: [1, 2, 3, 1, 2, 4], count: 4, last: 4, gaps: 0, dupes: 2 },
    { name: "a jump is a gap, kept", ids: [1, 2, 5, 6], count: 4, last: 6, gaps: 1, dupes: 0 },
    { name: "a stream starting late is a gap", ids: [3, 4], count: 2, last: 4, gaps: 1, dupes: 0 },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const log = new EventLog();
      for (const id of c.ids) log.add(id, ev(id));
      expect(log.events.map((e) => e.seq)).toHaveLength(c.count);
      expect(log.lastId).toBe(c.last);
      expect(log.gaps).toBe(c.gaps);
      expect(log.dupes).toBe(c.dupes);
    });
  }
});

describe("SSEParser", () => {
  it("splits messages across chunks and line endings, skipping comments", () => {
    const p = new SSEParser();
    const all: SSEMessage[] = [];
    const text = "retry: 2000\r\n\r\n: keepalive\n\nid: 1\nevent: status\ndata: {\"a\":\ndata: 1}\n\nevent: end\ndata: {\"state\":\"succeeded\",\"last_seq\":1}\n\n";
    for (let i = 0; i < text.length; i += 5) all.push(...p.feed(text.slice(i, i + 5)));
    expect(p.retry).toBe(2000);
    expect(all).toEqual([
      { id: "1", event: "status", data: '{"a":\n1}' },
      { id: undefined, event: "end", data: '{"state":"succeeded","last_seq":1}' },
    ]);
  });
});

// A fake server for follow(): each connection answers with the frames of
// one scripted round and records the Last-Event-ID it was sent.
function streamOf(parts: string[], error = false): ReadableStream<Uint8Array> {
  const enc = new TextEncoder();
  const left = parts.slice();
  return new ReadableStream({
    // One part per read, so the reader has every part before the break.
    pull(ctl) {
      const p = left.shift();
      if (p !== undefined) ctl.enqueue(enc.encode(p));
      else if (error) ctl.error(new Error("connection reset"));
      else ctl.close();
    },
  });
}

describe("follow", () => {
  it("reconnects from the last id it kept and drops what the server repeats", async () => {
    const sent: (string | null)[] = [];
    const rounds = [
      // First connection: three events, then the connection breaks.
      () => streamOf([frame(1), frame(2), frame(3)], true),
      // Second: a server that repeats 3 (dropped), skips nothing, then closes cleanly without end.
      () => streamOf([frame(3), frame(4)]),
      // Third: the rest and the end.
      () => streamOf([frame(5, "protocol", { type: "ready", executor_type: "replay", provider: "replay", model: "m" }), 'event: end\ndata: {"state":"succeeded","last_seq":5}\n\n']),
    ];
    const fakeFetch = async (_url: RequestInfo | URL, init?: RequestInit) => {
      const h = new Headers(init?.headers);
      sent.push(h.get("Last-Event-ID"));
      expect(h.get("Accept")).toBe("text/event-stream");
      const r = rounds.shift();
      if (!r) throw new Error("too many connections");
      return new Response(r(), { status: 200, headers: { "Content-Type": "text/event-stream" } });
    };
    const log = new EventLog();
    const model = new LogModel();
    let end: { state: string; last_seq: number } | undefined;
    const waits: number[] = [];
    const connected: boolean[] = [];
    const result = await follow({
      url: "http://maestro.test/api/v1/jobs/7/events",
      fetch: fakeFetch as typeof fetch,
      headers: () => ({ Authorization: "Bearer t" }),
      cursor: () => log.lastId,
      onMessages: (msgs) => {
        end = applyMessages(log, model, msgs) ?? end;
      },
      onConnected: (c) => connected.push(c),
      onUnauthorized: () => {
        throw new Error("unexpected 401");
      },
      signal: new AbortController().signal,
      wait: async (ms) => {
        waits.push(ms);
      },
    });
    expect(result).toBe("end");
    expect(sent).toEqual([null, "3", "4"]);
    expect(log.events.map((e) => e.seq)).toEqual([1, 2, 3, 4, 5]);
    expect(log.dupes).toBe(1);
    expect(log.gaps).toBe(0);
    expect(end).toEqual({ state: "succeeded", last_seq: 5 });
    expect(model.executor).toBe("replay");
    expect(waits).toHaveLength(2);
    expect(connected).toEqual([true, false, true, false, true, false]);
  });

  // The server writes a keepalive every 15 s. A connection that went
  // silent (a network that dropped without a reset: a laptop asleep, a
  // proxy, a VPN) showed "● live" for ever, the log frozen.
  it("reconnects when the stream goes silent past its keepalives", async () => {
    const sent: (string | null)[] = [];
    const connected: boolean[] = [];
    let n = 0;
    const fakeFetch = async (_url: string, init: RequestInit) => {
      sent.push(new Headers(init.headers).get("Last-Event-ID"));
      n++;
      // First: one event, then silence, the connection open, until the
      // reader gives it up.
      if (n === 1)
        return new Response(
          new ReadableStream<Uint8Array>({
            start(ctl) {
              ctl.enqueue(new TextEncoder().encode(frame(1)));
              init.signal?.addEventListener("abort", () => ctl.error(new DOMException("aborted", "AbortError")));
            },
          }),
          { status: 200 },
        );
      return new Response(streamOf([frame(2), 'event: end\ndata: {"state":"succeeded","last_seq":2}\n\n']), { status: 200 });
    };
    const log = new EventLog();
    const model = new LogModel();
    const result = await follow({
      url: "http://maestro.test/api/v1/jobs/7/events",
      fetch: fakeFetch as typeof fetch,
      headers: () => ({}),
      cursor: () => log.lastId,
      onMessages: (msgs) => void applyMessages(log, model, msgs),
      onConnected: (c) => connected.push(c),
      onUnauthorized: () => undefined,
      signal: new AbortController().signal,
      wait: async () => undefined,
      idleMs: 20,
    });
    expect(result).toBe("end");
    expect(sent).toEqual([null, "1"]);
    expect(log.events.map((e) => e.seq)).toEqual([1, 2]);
    expect(connected).toEqual([true, false, true, false]);
  }, 2000);

  it("stops on 401 and reports it", async () => {
    let unauthorized = 0;
    const r = await follow({
      url: "http://maestro.test/api/v1/jobs/7/events",
      fetch: (async () => new Response("{}", { status: 401 })) as typeof fetch,
      headers: () => ({}),
      cursor: () => 0,
      onMessages: () => undefined,
      onConnected: () => undefined,
      onUnauthorized: () => unauthorized++,
      signal: new AbortController().signal,
    });
    expect(r).toBe("unauthorized");
    expect(unauthorized).toBe(1);
  });
});

describe("LogModel", () => {
  it("joins streamed chunks, groups a tool call and sums usage per movement", () => {
    const m = new LogModel();
    const events: JobEvent[] = [
      ev(1, "run_event", { kind: "movement_started", data: { movement: "execute", number: 1 } }),
      ev(2, "protocol", { type: "response_start", response_id: "r1" }),
      ev(3, "protocol", { type: "response_chunk", response_id: "r1", content: "Hello ", is_thinking: false }),
      ev(4, "protocol", { type: "response_chunk", response_id: "r1", content: "world", is_thinking: false }),
      ev(5, "protocol", { type: "response_chunk", response_id: "r1", content: "hmm", is_thinking: true }),
      ev(6, "protocol", { type: "response_end", response_id: "r1", usage: { input_tokens: 10, output_tokens: 5, total_cost_usd: 0.25 } }),
      ev(7, "protocol", { type: "tool_call", call_id: "c1", tool: "Bash", args: { command: "false" } }),
      ev(8, "protocol", { type: "tool_start", call_id: "c1" }),
      ev(9, "protocol", { type: "tool_output", call_id: "c1", content: "exit status 1" }),
      ev(10, "protocol", { type: "tool_end", call_id: "c1", success: false, error_code: "tool_error" }),
      ev(11, "run_event", { kind: "movement_started", data: { movement: "verify", number: 2 } }),
      ev(12, "protocol", { type: "response_end", response_id: "r2", usage: { input_tokens: 1, output_tokens: 1, total_cost_usd: 0.5 } }),
    ];
    for (const e of events) m.add(e);
    const kinds = m.items.map((i) => i.kind);
    expect(kinds).toEqual(["movement", "text", "text", "tool", "movement"]);
    const text = m.items[1];
    expect(text?.kind === "text" && text.text).toBe("Hello world");
    const thinking = m.items[2];
    expect(thinking?.kind === "text" && thinking.thinking).toBe(true);
    const tool = m.items[3];
    expect(tool?.kind === "tool" && [tool.status, tool.output, tool.error]).toEqual(["failed", "exit status 1", "tool_error"]);
    expect(m.movements.map((x) => [x.name, x.inputTokens, x.cost, x.toolCalls, x.failed])).toEqual([
      ["execute", 10, 0.25, 1, 1],
      ["verify", 1, 0.5, 0, 0],
    ]);
    expect(m.totalCost).toBe(0.75);
  });

  it("says why a tool call failed with the output's last line, not the generic code 'failed' again", () => {
    // A Bash call of a non-zero exit ended with error_code "failed": the
    // row said "✗ failed failed".
    const m = new LogModel();
    for (const e of [
      ev(1, "protocol", { type: "tool_call", call_id: "c1", tool: "Bash", args: { command: "cat nope" } }),
      ev(2, "protocol", { type: "tool_output", call_id: "c1", content: "cat: nope: No such file or directory\nexit code 1\n" }),
      ev(3, "protocol", { type: "tool_end", call_id: "c1", success: false, error_code: "failed" }),
      ev(4, "protocol", { type: "tool_call", call_id: "c2", tool: "Bash", args: { command: "true" } }),
      ev(5, "protocol", { type: "tool_end", call_id: "c2", success: false, error_code: "failed" }),
    ])
      m.add(e);
    expect(m.items.map((i) => i.kind === "tool" && i.error)).toEqual(["exit code 1", "failed"]);
  });

  it("says what each event means: errors, the engine's events, why a job was requeued", () => {
    const m = new LogModel();
    const events: JobEvent[] = [
      ev(1, "run_event", { kind: "run_started", data: { piece: "general", initial_movement: "execute", max_movements: 12 } }),
      ev(2, "run_event", {
        kind: "tools_omitted",
        data: { movement: "execute", tools: [{ name: "WebSearch", reason: "no web search backend is configured" }] },
      }),
      ev(3, "protocol", { type: "error", message: "Operation aborted: the run was interrupted", fatal: false, error_type: "cancelled" }),
      ev(4, "status", { state: "queued", attempt: 2, worker: "vm:1/1", reason: "released" }),
      ev(5, "run_event", { kind: "resumed", data: { movement: "execute", entry: "restart" } }),
      ev(6, "run_event", { kind: "reminder", data: { movement: "execute", count: 1, max: 3 } }),
      ev(7, "run_event", { kind: "lessons", data: { movement: "execute", added: ["tests live in t/"], total: 2 } }),
      ev(8, "run_event", { kind: "waiting", data: { movement: "plan", for: "subtasks", subtasks: 2 } }),
      ev(9, "run_event", {
        kind: "firewall_block",
        data: { movement: "execute", tool: "WebFetch", url: "http://10.0.0.1/", address: "10.0.0.1", class: "private", stage: "resolve" },
      }),
      ev(10, "run_event", { kind: "something_new", data: {} }),
    ];
    for (const e of events) m.add(e);
    const labels = m.items.map((i) => (i.kind === "other" ? i.label : i.kind === "status" ? `${i.state} ${i.reason}` : i.kind));
    expect(labels).toEqual([
      "piece general: starting at execute (at most 12 movements)",
      "movement execute: not offered: WebSearch (no web search backend is configured)",
      "error (cancelled): Operation aborted: the run was interrupted",
      "queued released",
      "run resumed at execute (restart)",
      "movement execute: the model answered without transition or complete; reminder 1 of 3",
      "lessons from execute: tests live in t/ (2 kept)",
      "waiting for 2 subtask(s)",
      "movement execute: WebFetch refused http://10.0.0.1/: 10.0.0.1 is a private address",
      "something_new",
    ]);
  });
});
