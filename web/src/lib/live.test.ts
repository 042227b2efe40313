import { describe, expect, it } from "vitest";
import { LiveModel } from "./live";
import { gates, historyOf, type AgentCLI, type AgentTranscript } from "./agents";

const snap = (cursor: number, pending: Record<string, unknown>[] = []) => ({
  session_id: "s1",
  cursor,
  state: { pending_requests: pending, controller_connection_id: "conn_a" },
});

describe("LiveModel", () => {
  it("applies messages in cursor order, drops replays, keeps approvals pending until resolved", () => {
    const m = new LiveModel();
    m.apply({ type: "snapshot", snapshot: snap(3) });
    m.apply({ type: "message", cursor: 4, message: { type: "response_start", response_id: "r" } });
    m.apply({ type: "message", cursor: 5, message: { type: "response_chunk", response_id: "r", content: "Hel", is_thinking: false } });
    m.apply({ type: "message", cursor: 6, message: { type: "response_chunk", response_id: "r", content: "lo", is_thinking: false } });
    m.apply({ type: "message", cursor: 6, message: { type: "response_chunk", response_id: "r", content: "lo", is_thinking: false } });
    expect(m.dupes).toBe(1);
    expect(m.log.items.filter((i) => i.kind === "text").map((i) => (i.kind === "text" ? i.text : ""))).toEqual(["Hello"]);
    m.apply({ type: "message", cursor: 7, message: { type: "tool_call", call_id: "c1", tool: "Write", args: { path: "a" } } });
    m.apply({ type: "message", cursor: 8, message: { type: "server_request", request_id: "c1", request_type: "approval", call_id: "c1", tool: "Write", args: { path: "a" } } });
    expect(m.pending.map((p) => [p.requestId, p.type, p.tool])).toEqual([["c1", "approval", "Write"]]);
    m.apply({ type: "message", cursor: 9, message: { type: "server_request_resolved", request_id: "c1", request_type: "approval", resolution: "denied", resolved_by: "user", reason: "not now" } });
    expect(m.pending).toEqual([]);
    expect(m.log.items.some((i) => i.kind === "other" && i.label === "approval denied by user: not now")).toBe(true);
    expect(m.cursor).toBe(9);
  });

  it("treats a reset as a fresh start and records its reason", () => {
    const m = new LiveModel();
    m.apply({ type: "snapshot", snapshot: snap(10) });
    m.apply({ type: "reset", reason: "replay_gap", snapshot: snap(40, [{ id: "q", request_id: "q", kind: "approval", tool: "Bash", args: {} }]) });
    expect(m.resets).toEqual([{ reason: "replay_gap", cursor: 40 }]);
    expect(m.cursor).toBe(40);
    expect(m.pending.map((p) => p.requestId)).toEqual(["q"]);
    // A published snapshot older than what was applied is dropped.
    m.apply({ type: "snapshot", snapshot: snap(12) });
    expect(m.cursor).toBe(40);
  });
});

describe("LiveModel subscribed again", () => {
  it("seeds a first subscription and shows the frames a later one skipped as a replay gap", () => {
    const m = new LiveModel();
    m.resubscribed(snap(5));
    expect(m.cursor).toBe(0);
    m.apply({ type: "message", cursor: 1, message: { type: "response_start", response_id: "r" } });
    m.resubscribed(snap(1));
    expect(m.resets).toEqual([]);
    m.resubscribed(snap(9));
    expect(m.resets).toEqual([{ reason: "replay_gap", cursor: 9 }]);
    expect(m.cursor).toBe(9);
    m.apply({ type: "message", cursor: 9, message: { type: "response_end", response_id: "r" } });
    expect(m.dupes).toBe(1);
  });
});

describe("agent gates", () => {
  const base: AgentCLI = { id: "x", name: "X", source: "user file", binary: "x", parser: "p", capabilities: {} };
  it("hides resume and the session browser without their flags", () => {
    expect(gates(base)).toEqual({ sessions: false, resume: false, readOnly: false, images: false, cost: false });
    const full = { ...base, session_storage: "claude-projects", capabilities: { resume: true, session_storage: true, read_only_mode: true, image_input: true, cost_tracking: true } };
    expect(gates(full)).toEqual({ sessions: true, resume: true, readOnly: true, images: true, cost: true });
    expect(gates({ ...full, session_storage: "none" }).sessions).toBe(false);
  });
  it("builds init history starting with the user and ending with the assistant", () => {
    const tr = {
      session: { id: "s", message_count: 4, path: "/p" },
      stats: { records: 0, unknown: 0, malformed: 0, partial: 0 },
      messages: [
        { role: "assistant", text: "orphan" },
        { role: "user", text: "a" },
        { role: "user", text: "b" },
        { role: "tool", text: "out" },
        { role: "assistant", text: "c" },
        { role: "user", text: "dangling" },
      ],
    } as AgentTranscript;
    expect(historyOf(tr)).toEqual([
      { role: "user", content: "a\n\nb" },
      { role: "assistant", content: "c" },
    ]);
  });
});

describe("LiveModel after a reset", () => {
  it("starts the text after a reset anew and sums the usage of the responses", () => {
    const m = new LiveModel();
    m.apply({ type: "snapshot", snapshot: snap(1) });
    m.apply({ type: "message", cursor: 2, message: { type: "response_start", response_id: "r" } });
    m.apply({ type: "message", cursor: 3, message: { type: "response_chunk", response_id: "r", content: "Hel", is_thinking: false } });
    m.apply({ type: "reset", reason: "lagged", snapshot: snap(9) });
    m.apply({ type: "message", cursor: 10, message: { type: "response_chunk", response_id: "r", content: "end.", is_thinking: false } });
    m.apply({ type: "message", cursor: 11, message: { type: "response_end", response_id: "r", usage: { input_tokens: 5, output_tokens: 7, total_cost_usd: 0.25, provider: "claude-code" } } });
    // The text before the reset is not joined with the text after it: the
    // reset's marker sits between them.
    expect(m.log.items.map((i) => (i.kind === "text" ? i.text : i.kind === "other" ? i.type : i.kind))).toEqual(["Hel", "reset", "end."]);
    expect(m.log.usage).toEqual({ inputTokens: 5, outputTokens: 7, cacheTokens: 0, cost: 0.25, responses: 1, provider: "claude-code" });
  });
});
