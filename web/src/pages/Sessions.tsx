import { useLayoutEffect, useRef, useState, type FormEvent } from "react";
import { Link, useNavigate } from "react-router";
import { useQuery } from "@tanstack/react-query";
import { useApi } from "../api/context";
import { unwrap } from "../api/client";
import { Alert, InputField, PageHeader, Section, SelectField } from "../components/Field";
import { headless, type Snapshot } from "../lib/live";

// A listed session: serve's listing names every live session in the store
// (docs/scale-out.md) with its owner; the sessions this server owns carry
// their runtime snapshot, the others are reached through this server's proxy.
type ListedSession = Partial<Snapshot> & { id?: string; local?: boolean; address?: string; snapshot?: Snapshot };

// formWords says a create error in the form's words: the API names the
// workspace by its field, workspaceRoot, which the form calls Workspace.
export function formWords(msg: string): string {
  return msg.replace(/\bomit workspaceRoot\b/g, "leave Workspace empty").replace(/\bworkspaceRoot\b/g, "Workspace");
}

// Sessions lists the live agent sessions of this server and of the other
// serve processes sharing its store (GET /api/headless/sessions) and creates
// one (POST /api/headless/sessions):
// workspace, model and approval mode (docs/remote-attach.md, "In maestro
// serve").
export default function Sessions() {
  const api = useApi();
  const navigate = useNavigate();
  const list = useQuery({
    queryKey: ["live-sessions"],
    queryFn: () => headless<{ sessions: ListedSession[] }>(api, "GET", "/api/headless/sessions?state=live"),
    refetchInterval: 5000,
  });
  const [workspace, setWorkspace] = useState("");
  const [model, setModel] = useState("");
  const [approval, setApproval] = useState("prompt");
  const [agent, setAgent] = useState("");
  const agents = useQuery({ queryKey: ["agents"], queryFn: async () => unwrap(await api.client.GET("/api/v1/agents")) });
  const installed = (agents.data?.agents ?? []).filter((a) => a.path);
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState(false);
  const refused = useRef<string | null>(null);
  useLayoutEffect(() => {
    if (busy || !refused.current) return;
    document.getElementById(refused.current)?.focus();
    refused.current = null;
  }, [busy, error]);

  async function create(e: FormEvent) {
    e.preventDefault();
    // Start session is aria-disabled while it asks, not disabled (that
    // dropped its focus on <body>): a second press does nothing.
    if (busy) return;
    setError(undefined);
    setBusy(true);
    try {
      const body: Record<string, unknown> = { approvalMode: approval, clientInfo: { name: "maestro-web" } };
      if (workspace.trim()) body.workspaceRoot = workspace.trim();
      if (model.trim()) body.model = model.trim();
      if (agent) body.agent = agent;
      const snap = await headless<Snapshot>(api, "POST", "/api/headless/sessions", body);
      navigate(`/sessions/${encodeURIComponent(snap.session_id)}`);
    } catch (err) {
      const msg = err instanceof Error ? err.message : String(err);
      setError(formWords(msg));
      // The field the refusal names takes the focus (else Start session
      // keeps it).
      refused.current = /\bworkspaceRoot\b/.test(msg) ? "session-workspace" : /\bmodel\b/i.test(msg) ? "session-model" : "create-session";
    } finally {
      setBusy(false);
    }
  }

  const sessions = list.data?.sessions ?? [];
  return (
    <div className="space-y-4" aria-labelledby="sessions-title">
      <PageHeader id="sessions-title" title="Live sessions" />
      <Section id="new-session" title="New live session">
        <form onSubmit={create} className="grid gap-3 sm:grid-cols-2 lg:grid-cols-4" data-testid="new-session-form">
          <InputField
            id="session-workspace"
            label="Workspace (absolute path on the server; empty: a fresh directory)"
            value={workspace}
            onChange={setWorkspace}
            placeholder="/home/me/project"
          />
          <SelectField
            id="session-agent"
            label="Runs on"
            value={agent}
            onChange={setAgent}
            options={[{ value: "", label: "Maestro's own loop" }, ...installed.map((a) => ({ value: a.id, label: `agent CLI: ${a.name}` }))]}
          />
          <InputField id="session-model" label={agent ? "Model (the CLI's; empty: its default)" : "Model (provider/model; empty: the server's default)"} value={model} onChange={setModel} placeholder="anthropic/claude-sonnet-4-5" />
          <SelectField
            id="session-approval"
            label="Approval mode"
            value={approval}
            onChange={setApproval}
            options={[
              { value: "prompt", label: "prompt: ask me" },
              { value: "auto", label: "auto: run every tool" },
              { value: "fail", label: "fail: deny what needs approval" },
            ]}
          />
          <div className="sm:col-span-2 lg:col-span-4">
            <button type="submit" id="create-session" className="btn btn-primary" aria-disabled={busy || undefined} data-testid="create-session">
              Start session
            </button>
          </div>
          {error && <Alert className="sm:col-span-2 lg:col-span-4">{error}</Alert>}
        </form>
      </Section>
      {list.error && <Alert testId="sessions-error">{String((list.error as Error).message)}</Alert>}
      <div className="overflow-x-auto">
        <table className="w-full text-left text-sm" data-testid="sessions-table">
          <caption className="sr-only">Live sessions</caption>
          <thead>
            <tr className="border-b border-slate-200 dark:border-slate-700">
              <th scope="col" className="p-2">Session</th>
              <th scope="col" className="hidden p-2 sm:table-cell">Model</th>
              <th scope="col" className="hidden p-2 sm:table-cell">Workspace</th>
              <th scope="col" className="hidden p-2 sm:table-cell">Clients</th>
              <th scope="col" className="p-2">State</th>
              <th scope="col" className="p-2">Attach</th>
            </tr>
          </thead>
          <tbody>
            {sessions.map((s) => {
              const id = s.snapshot?.session_id ?? s.session_id ?? s.id ?? "";
              const st = s.snapshot?.state ?? s.state;
              const model = st ? [st.provider, st.model].filter(Boolean).join("/") : `on ${s.address ?? "another server"}`;
              return (
                <tr key={id} data-testid="session-row" data-id={id} className="border-b border-slate-100 dark:border-slate-800">
                  <td className="p-2">
                    <span className="font-mono text-xs break-all">{id}</span>
                    {/* Below sm the model and workspace columns are hidden (the
                        Attach column stayed off-screen at 390 px): they are
                        said here instead. */}
                    <span className="block text-xs text-slate-600 sm:hidden dark:text-slate-400">
                      {model}
                      {st?.cwd && <span className="block font-mono break-all">{st.cwd}</span>}
                    </span>
                  </td>
                  <td className="hidden p-2 sm:table-cell">{model}</td>
                  <td className="hidden max-w-xs truncate p-2 font-mono text-xs sm:table-cell" title={st?.cwd}>
                    {st?.cwd}
                  </td>
                  <td className="hidden p-2 sm:table-cell">{st ? (st.connection_count ?? 0) : ""}</td>
                  <td className="p-2">
                    {!st ? "live elsewhere" : st.is_responding ? "responding" : (st.pending_requests?.length ?? 0) > 0 ? "waiting for you" : "idle"}
                  </td>
                  <td className="space-x-2 p-2 whitespace-nowrap">
                    <Link className="text-sky-700 underline dark:text-sky-400" to={`/sessions/${encodeURIComponent(id)}`}>
                      controller
                    </Link>
                    <Link className="text-sky-700 underline dark:text-sky-400" to={`/sessions/${encodeURIComponent(id)}?role=viewer`}>
                      viewer
                    </Link>
                  </td>
                </tr>
              );
            })}
            {/* Not while the list cannot be read: under the error it was
                taken for the server's answer. */}
            {sessions.length === 0 && !list.isLoading && !list.error && (
              <tr>
                <td colSpan={6} className="p-2 text-slate-600 dark:text-slate-400">
                  No live session on this server.
                </td>
              </tr>
            )}
          </tbody>
        </table>
      </div>
    </div>
  );
}
