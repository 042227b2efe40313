// Agent CLIs (GET /api/v1/agents) and what the UI offers for each, gated by
// its capability flags (docs/agent-clis.md): the session browser needs
// session storage, "resume" buttons the resume capability, the read-only
// toggle read_only_mode, image attachments image_input, the cost widget
// cost_tracking.
import type { components } from "../api/schema";

export type AgentCLI = components["schemas"]["AgentCLI"];
export type AgentSession = components["schemas"]["AgentSession"];
export type AgentTranscript = components["schemas"]["AgentTranscript"];

export interface Gates {
  sessions: boolean;
  resume: boolean;
  readOnly: boolean;
  images: boolean;
  cost: boolean;
}

export function gates(a: AgentCLI): Gates {
  const c = a.capabilities;
  return {
    sessions: c.session_storage === true && !!a.session_storage && a.session_storage !== "none",
    resume: c.resume === true,
    readOnly: c.read_only_mode === true,
    images: c.image_input === true,
    cost: c.cost_tracking === true,
  };
}

// historyOf turns a transcript into init.history (protocol.md, "init"):
// user and assistant texts, consecutive ones of a role joined, starting
// with the user's and ending with the assistant's.
export function historyOf(tr: AgentTranscript): { role: "user" | "assistant"; content: string }[] {
  const out: { role: "user" | "assistant"; content: string }[] = [];
  for (const m of tr.messages) {
    if ((m.role !== "user" && m.role !== "assistant") || !m.text?.trim()) continue;
    const last = out[out.length - 1];
    if (last && last.role === m.role) last.content += `\n\n${m.text}`;
    else if (out.length > 0 || m.role === "user") out.push({ role: m.role, content: m.text });
  }
  if (out.length > 0 && out[out.length - 1]!.role === "user") out.pop();
  return out;
}

// The live page sends this init history once it controls the session.
export const pendingHistoryKey = (sessionId: string) => `maestro.live.history.${sessionId}`;
