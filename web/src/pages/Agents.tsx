import { useState, type FormEvent } from "react";
import { Link, useNavigate, useSearchParams } from "react-router";
import { useQuery } from "@tanstack/react-query";
import { useApi } from "../api/context";
import { unwrap } from "../api/client";
import { Alert, CheckboxField, InputField, PageHeader, Section } from "../components/Field";
import { Markdown } from "../components/Markdown";
import { gates, historyOf, pendingHistoryKey, type AgentCLI, type AgentTranscript } from "../lib/agents";
import { headless, type Snapshot } from "../lib/live";

// Agents lists the agent CLIs the server knows with version, path, source
// and capability flags, and browses the sessions one stored for a project
// directory: a transcript, "resume as a task", "continue in a live
// session". Buttons show only where the CLI's flags allow them.
export default function Agents() {
  const api = useApi();
  const [params, setParams] = useSearchParams();
  const selected = params.get("agent") ?? "";
  const list = useQuery({ queryKey: ["agents"], queryFn: async () => unwrap(await api.client.GET("/api/v1/agents")) });
  const agents = list.data?.agents ?? [];
  const agent = agents.find((a) => a.id === selected);
  return (
    <div className="space-y-4">
      <PageHeader id="agents-title" title="Agent CLIs" />
      {list.error && <Alert testId="agents-error">{(list.error as Error).message}</Alert>}
      {(list.data?.invalid ?? []).length > 0 && (
        <Alert testId="agents-invalid">Left out: {list.data!.invalid.join("; ")}</Alert>
      )}
      {/* A server with none installed showed a row "not found" for each,
          and not what to do about it. */}
      {list.isSuccess && agents.length > 0 && agents.every((a) => !a.path) && (
        <p className="text-sm" data-testid="agents-none">
          None of these agent CLIs is installed on this server: it runs the ones it finds on its PATH ({agents.map((a) => a.binary).join(", ")}). Install
          one as its project says (docs/agent-clis.md) to run tasks and live sessions on it; meanwhile tasks run on the native model or replay.
        </p>
      )}
      <div className="overflow-x-auto">
        <table className="w-full text-left text-sm" data-testid="agents-table">
          <caption className="sr-only">Agent CLIs</caption>
          <thead>
            <tr className="border-b border-slate-200 dark:border-slate-700">
              <th scope="col" className="p-2">Agent</th>
              <th scope="col" className="p-2">Version</th>
              <th scope="col" className="p-2">Path</th>
              <th scope="col" className="p-2">Source</th>
              <th scope="col" className="p-2">Capabilities</th>
            </tr>
          </thead>
          <tbody>
            {list.isPending && (
              // Each CLI is asked for its version (a few seconds for the
              // first listing): an empty table said there were none.
              <tr>
                <td colSpan={5} className="p-2 text-slate-600 dark:text-slate-400" role="status" data-testid="agents-loading">
                  Looking for the agent CLIs on the server and asking each for its version…
                </td>
              </tr>
            )}
            {agents.map((a) => (
              <tr key={a.id} data-testid="agent-row" data-id={a.id} className={`border-b border-slate-100 dark:border-slate-800 ${a.id === selected ? "bg-sky-50 dark:bg-sky-950" : ""}`}>
                <td className="p-2">
                  {/* The chosen row is tinted; a screen reader is told too (the
                      tint alone said nothing to it): the button is the
                      current one of the list. */}
                  <button type="button" className="font-semibold text-sky-700 underline dark:text-sky-400" aria-current={a.id === selected ? "true" : undefined} onClick={() => setParams({ agent: a.id })}>
                    {a.name}
                  </button>{" "}
                  <span className="font-mono text-xs">{a.id}</span>
                </td>
                <td className="p-2">{a.path ? (a.version ?? "?") : "—"}</td>
                <td className="max-w-xs truncate p-2 font-mono text-xs" title={a.path ?? a.unusable}>
                  {a.path ?? (a.unusable ? `unusable (${a.unusable})` : `not found (${a.binary})`)}
                </td>
                <td className="p-2" title={a.file}>
                  {a.source}
                </td>
                <td className="p-2 text-xs">
                  {Object.entries(a.capabilities)
                    .filter(([, on]) => on)
                    .map(([k]) => k)
                    .join(", ")}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      {agent && <AgentPanel key={agent.id} agent={agent} />}
    </div>
  );
}

function AgentPanel({ agent }: { agent: AgentCLI }) {
  const api = useApi();
  const g = gates(agent);
  const [dir, setDir] = useState("");
  const [project, setProject] = useState("");
  const [open, setOpen] = useState<string>();
  const sessions = useQuery({
    queryKey: ["agent-sessions", agent.id, project],
    enabled: g.sessions && project !== "",
    queryFn: async () => unwrap(await api.client.GET("/api/v1/agents/{id}/sessions", { params: { path: { id: agent.id }, query: { project } } })),
  });
  return (
    <Section id="agent-panel" title={`${agent.name} (${agent.id})`}>
      <ul className="mb-3 flex flex-wrap gap-2 text-xs" data-testid="agent-gates">
        <li className="badge bg-slate-200 dark:bg-slate-700">session browser: {g.sessions ? "yes" : "no"}</li>
        <li className="badge bg-slate-200 dark:bg-slate-700">resume: {g.resume ? "yes" : "no"}</li>
        <li className="badge bg-slate-200 dark:bg-slate-700">read-only mode: {g.readOnly ? "yes" : "no"}</li>
        <li className="badge bg-slate-200 dark:bg-slate-700">images: {g.images ? "yes" : "no"}</li>
        <li className="badge bg-slate-200 dark:bg-slate-700" data-testid="cost-widget-gate">cost: {g.cost ? "tracked" : "not reported"}</li>
      </ul>
      {!g.sessions ? (
        <p className="text-sm" data-testid="no-session-browser">
          {agent.name} keeps no sessions Maestro can read (session_storage: {agent.session_storage ?? "none"}).
        </p>
      ) : (
        <>
          <form
            className="flex flex-wrap items-end gap-2"
            onSubmit={(e: FormEvent) => {
              e.preventDefault();
              setOpen(undefined);
              setProject(dir.trim());
            }}
          >
            <div className="min-w-64 flex-1">
              <InputField id="agent-project" label="Project directory (absolute, on the server)" value={dir} onChange={setDir} placeholder="/home/me/project" />
            </div>
            <button type="submit" className="btn" data-testid="list-agent-sessions">
              List sessions
            </button>
          </form>
          {sessions.error && <Alert testId="agent-sessions-error">{(sessions.error as Error).message}</Alert>}
          {sessions.data && (
            <ul className="mt-3 divide-y divide-slate-100 text-sm dark:divide-slate-800" data-testid="agent-sessions">
              {sessions.data.sessions.map((s) => (
                <li key={s.id} className="py-1.5" data-testid="agent-session" data-id={s.id}>
                  <button type="button" className="text-left text-sky-700 underline wrap-anywhere dark:text-sky-400" onClick={() => setOpen(s.id)}>
                    {s.title || s.first_prompt || s.id}
                  </button>
                  <span className="ml-2 text-xs text-slate-600 dark:text-slate-400">
                    {s.updated ? new Date(s.updated).toLocaleString() : ""} · {s.message_count} messages{s.model ? ` · ${s.model}` : ""}
                  </span>
                </li>
              ))}
              {sessions.data.sessions.length === 0 && <li className="py-1.5 wrap-anywhere">No session for this project (looked in {sessions.data.locations.join(", ")}).</li>}
            </ul>
          )}
          {open && <Transcript agent={agent} sessionId={open} />}
        </>
      )}
    </Section>
  );
}

function Transcript({ agent, sessionId }: { agent: AgentCLI; sessionId: string }) {
  const api = useApi();
  const navigate = useNavigate();
  const g = gates(agent);
  const tr = useQuery({
    queryKey: ["agent-transcript", agent.id, sessionId],
    queryFn: async () => unwrap(await api.client.GET("/api/v1/agents/{id}/sessions/{session}", { params: { path: { id: agent.id, session: sessionId } } })),
  });
  const [request, setRequest] = useState("");
  const [readOnly, setReadOnly] = useState(false);
  const [error, setError] = useState<string>();
  if (tr.error) return <Alert testId="transcript-error">{(tr.error as Error).message}</Alert>;
  if (!tr.data) return <p className="text-sm">Loading transcript…</p>;
  const t: AgentTranscript = tr.data;

  async function asTask() {
    setError(undefined);
    try {
      // The task's first movement resumes the CLI's own session
      // (agent_session), which holds the conversation.
      const body = (readOnly ? "Read only: do not change any file. " : "") + (request || "Continue where this session left off.");
      const res = unwrap(
        await api.client.POST("/api/v1/tasks", {
          body: { title: `Continue ${t.session.title || t.session.first_prompt || t.session.id}`.slice(0, 200), body, executor: "agent-cli", agent: agent.id, agent_session: t.session.id },
        }),
      );
      navigate(`/tasks/${res.task.id}`);
    } catch (e) {
      setError(e instanceof Error ? e.message : String(e));
    }
  }
  // live starts a live session in the stored session's directory: on the
  // CLI itself resuming its session (agent, agentSession), or on Maestro's
  // own loop seeded with the conversation (init.history).
  async function live(onCLI: boolean) {
    setError(undefined);
    try {
      const body: Record<string, unknown> = { clientInfo: { name: "maestro-web" }, approvalMode: "prompt" };
      if (t.session.dir) body.workspaceRoot = t.session.dir;
      if (onCLI) {
        body.agent = agent.id;
        body.agentSession = t.session.id;
      }
      const snap = await headless<Snapshot>(api, "POST", "/api/headless/sessions", body);
      if (!onCLI) sessionStorage.setItem(pendingHistoryKey(snap.session_id), JSON.stringify(historyOf(t)));
      navigate(`/sessions/${encodeURIComponent(snap.session_id)}`);
    } catch (e) {
      setError(e instanceof Error ? e.message : String(e));
    }
  }

  return (
    <div className="mt-4 space-y-3" data-testid="transcript">
      <h3 className="font-semibold wrap-anywhere">{t.session.title || t.session.first_prompt || t.session.id}</h3>
      <p className="text-xs text-slate-600 wrap-anywhere dark:text-slate-400">
        {t.session.dir} · {t.messages.length} messages · {t.session.path}
      </p>
      {g.resume && (
        <div className="card space-y-2" data-testid="resume-controls">
          <InputField id="resume-request" label="What next (optional)" value={request} onChange={setRequest} />
          {g.readOnly && <CheckboxField id="resume-read-only" label="Read only" checked={readOnly} onChange={setReadOnly} />}
          <p className="text-xs text-slate-600 dark:text-slate-400">
            As a task, the piece's first movement resumes this {agent.name} session on the server; a live session resumes it too, interactively.
          </p>
          <div className="flex flex-wrap gap-2">
            <button type="button" className="btn btn-primary" data-testid="resume-task" onClick={() => void asTask()}>
              Resume as a task
            </button>
            <button type="button" className="btn" data-testid="resume-live" disabled={!agent.path} title={agent.path ? undefined : `${agent.binary} is not installed on the server`} onClick={() => void live(true)}>
              Resume in a live session
            </button>
            <button type="button" className="btn" data-testid="continue-live" onClick={() => void live(false)}>
              Continue on Maestro's loop
            </button>
          </div>
        </div>
      )}
      {error && <Alert>{error}</Alert>}
      <ol className="space-y-2">
        {t.messages.map((m, i) => (
          // A long word (a pasted hash, a path) wraps: a prompt of one made the page 44,000 px wide.
          <li key={i} className="rounded border border-slate-200 p-2 text-sm wrap-anywhere dark:border-slate-700" data-testid="transcript-message" data-role={m.role}>
            <p className="text-xs font-semibold uppercase">{m.role}{m.model ? ` · ${m.model}` : ""}</p>
            {m.thinking && (
              <details className="text-slate-600 italic dark:text-slate-400">
                <summary>∴ thinking</summary>
                <p className="bidi-auto whitespace-pre-wrap">{m.thinking}</p>
              </details>
            )}
            {m.text && (m.role === "assistant" ? <Markdown text={m.text} /> : <p className="bidi-auto whitespace-pre-wrap">{m.text}</p>)}
            {(m.tool_calls ?? []).map((c, j) => (
              <details key={`c${j}`} className="mt-1">
                <summary className="font-mono text-xs">● {c.name}</summary>
                <pre tabIndex={0} className="max-h-60 overflow-auto rounded bg-slate-100 p-2 text-xs dark:bg-slate-800">
                  {JSON.stringify(c.input, null, 2)}
                </pre>
              </details>
            ))}
            {(m.tool_results ?? []).map((r, j) => (
              <details key={`r${j}`} className="mt-1">
                <summary className={`font-mono text-xs ${r.is_error ? "text-red-700 dark:text-red-400" : ""}`}>
                  ↳ {r.name || r.id} {r.is_error ? "✗" : "✓"}
                </summary>
                <pre tabIndex={0} className="max-h-60 overflow-auto rounded bg-slate-100 p-2 text-xs dark:bg-slate-800">
                  {r.output}
                </pre>
              </details>
            ))}
          </li>
        ))}
      </ol>
      <p className="text-xs">
        <Link to="/tasks/new" className="text-sky-700 underline dark:text-sky-400">
          New task
        </Link>
      </p>
    </div>
  );
}
