import { useCallback, useEffect, useLayoutEffect, useRef, useState, type FormEvent } from "react";
import { Link, useParams, useSearchParams } from "react-router";
import { EventLogView } from "../components/EventLog";
import { ConfirmDialog } from "../components/ConfirmDialog";
import { Alert } from "../components/Field";
import type { PendingRequest, Role } from "../lib/live";
import { useLiveSession, type LiveView } from "../lib/useLiveSession";
import { useQuery } from "@tanstack/react-query";
import { useApi } from "../api/context";
import { unwrap } from "../api/client";
import { gates, type AgentCLI } from "../lib/agents";
import { formatCost } from "../lib/format";
import { useTitle } from "../lib/title";

type Send = (msg: Record<string, unknown>) => Promise<unknown>;

const linkLabel: Record<LiveView["link"], string> = {
  subscribing: "connecting…",
  live: "● live",
  reconnecting: "○ reconnecting…",
  lease_held: "another client controls this session",
  ended: "session ended",
  failed: "failed",
};

// SessionLive is one live session: the streamed conversation drawn as the
// task log, a prompt box (controller only), server requests as dialogs,
// interrupt, connection and lease state, resets shown as they come, and a
// file panel over the utility operations.
export default function SessionLive() {
  const { id = "" } = useParams();
  const [params] = useSearchParams();
  const role: Role = params.get("role") === "viewer" ? "viewer" : "controller";
  const { view, send, upload, takeControl } = useLiveSession(id, role);
  const agent = useSessionAgent(view);
  const [confirmTake, setConfirmTake] = useState(false);
  const [sendError, setSendError] = useState<string>();
  const act = async (msg: Record<string, unknown>) => {
    setSendError(undefined);
    try {
      await send(msg);
    } catch (e) {
      setSendError(e instanceof Error ? e.message : String(e));
    }
  };
  const snap = view.snapshot;
  const focusPrompt = useCallback(() => document.getElementById("prompt")?.focus(), []);
  // Take control goes once it is done (this client controls the session):
  // the focus it held went to <body>. The prompt, now enabled, takes it.
  const taking = useRef(false);
  useEffect(() => {
    if (!taking.current || !view.controller) return;
    taking.current = false;
    const a = document.activeElement;
    if (!a || a === document.body || !a.isConnected) focusPrompt();
  }, [view.controller, focusPrompt]);
  const pending = view.controller ? view.pending[0] : undefined;
  // Escape sets the request aside (it stays pending): the dialog is modal,
  // and Escape did nothing, so that the log behind it could not be read
  // before answering. "Answer the request" opens it again.
  const [aside, setAside] = useState<string>();
  const request = pending && pending.requestId !== aside ? pending : undefined;
  // The tab says which session and when the agent waits for this client
  // (lib/title.ts).
  useTitle(`Session ${id.slice(0, 8)}${pending ? " (waiting for you)" : ""}`);
  if (view.link === "ended" && !snap) {
    // The server has no such session (it ended before this page opened:
    // a bookmark, a reload after the server restarted, a mistyped link).
    // It showed an empty log, a prompt box and "you do not hold the
    // controller lease" under "Headless session not found".
    return (
      <div className="space-y-3" aria-labelledby="session-title">
        <h1 id="session-title" className="text-xl font-semibold">
          Session <span className="font-mono text-base break-all">{id}</span>
        </h1>
        <Alert testId="session-gone">
          This server has no live session {id}: it has ended, or the link is wrong.
        </Alert>
        <Link to="/sessions" className="btn" data-testid="session-gone-list">
          All live sessions
        </Link>
      </div>
    );
  }
  return (
    <div className="space-y-3" aria-labelledby="session-title">
      <div className="flex flex-wrap items-center gap-2">
        <h1 id="session-title" className="mr-auto text-xl font-semibold">
          Session <span className="font-mono text-base">{id}</span>
        </h1>
        <Link to="/sessions" className="btn">
          All sessions
        </Link>
      </div>
      <div className="flex flex-wrap items-center gap-3 text-sm" data-testid="session-state" data-link={view.link} data-role={role} data-controller={view.controller ? "true" : "false"}>
        <span className="badge bg-slate-200 dark:bg-slate-700" aria-live="polite">
          {linkLabel[view.link]}
        </span>
        <span data-testid="lease-state">
          {view.link === "ended"
            ? "this session has ended: its log stays here, and Live sessions starts another"
            : view.controller
            ? `you control this session (lease until ${view.sub?.lease_expires_at ? new Date(view.sub.lease_expires_at).toLocaleTimeString() : "—"}, renewed while attached)`
            : role === "viewer"
              ? "viewer: you watch, you cannot send"
              : "you do not hold the controller lease"}
        </span>
        {snap && (
          <span className="text-slate-600 wrap-anywhere dark:text-slate-400">
            {[snap.state.provider, snap.state.model].filter(Boolean).join("/")} · {snap.state.cwd} · cursor {view.log.lastId}
          </span>
        )}
        {pending && !request && (
          <span role="status" className="flex flex-wrap items-center gap-2">
            <span className="font-semibold text-amber-800 dark:text-amber-300">The agent waits for your answer.</span>
            <button type="button" className="btn btn-primary" data-testid="show-request" onClick={() => setAside(undefined)}>
              Answer the request
            </button>
          </span>
        )}
        {role === "controller" && !view.controller && (view.link === "lease_held" || view.link === "live") && (
          <button type="button" className="btn" data-testid="take-control" onClick={() => setConfirmTake(true)}>
            Take control
          </button>
        )}
      </div>
      {view.error && view.link !== "live" && <Alert testId="session-error">{view.error}</Alert>}
      {view.resets.length > 0 && (
        <p role="status" data-testid="session-resets" className="rounded border border-amber-300 bg-amber-50 px-3 py-1 text-sm text-amber-900 dark:border-amber-700 dark:bg-amber-950 dark:text-amber-200">
          The stream was reset {view.resets.length} time(s) (
          {view.resets.map((r) => `${r.reason} at cursor ${r.cursor}`).join(", ")}): what happened before was replaced by a snapshot, so earlier messages may be missing above.
        </p>
      )}
      <UsageWidget view={view} agent={agent} />
      <div className="grid gap-3 lg:grid-cols-[1fr_18rem]">
        <div className="space-y-2">
          <EventLogView log={view.log} announce={false} />
          {role === "controller" && (
            <PromptBox disabled={!view.controller} responding={view.responding} onSend={act} upload={upload} images={!agent || gates(agent).images} agentName={agent?.name} />
          )}
          {sendError && <Alert testId="send-error">{sendError}</Alert>}
        </div>
        {view.controller && <FilePanel send={act} utility={view.utility} />}
      </div>
      <RequestDialog request={request} onAnswer={act} onClosed={focusPrompt} onAside={() => setAside(pending?.requestId)} />
      <ConfirmDialog
        open={confirmTake}
        title="Take control?"
        message="The client that controls this session now will lose the lease: its messages will be refused."
        confirmLabel="Take control"
        onCancel={() => setConfirmTake(false)}
        onConfirm={() => {
          setConfirmTake(false);
          taking.current = true;
          takeControl();
        }}
      />
    </div>
  );
}

// useSessionAgent is the agent CLI a live session runs on, if any: the
// one whose id the session's provider (or its usage's) names.
function useSessionAgent(view: LiveView): AgentCLI | undefined {
  const api = useApi();
  const agents = useQuery({ queryKey: ["agents"], queryFn: async () => unwrap(await api.client.GET("/api/v1/agents")), staleTime: 60_000 });
  const id = view.usage.provider || view.snapshot?.state.provider;
  return (agents.data?.agents ?? []).find((a) => a.id === id);
}

// UsageWidget shows the session's tokens and cost summed from the usage
// of its responses (response_end). On an agent CLI (the usage's provider
// is its id) the cost is shown only where its definition has the
// cost_tracking capability (docs/agent-clis.md); after a reset the sums
// miss what the reset skipped, and say so.
function UsageWidget({ view, agent }: { view: LiveView; agent: AgentCLI | undefined }) {
  const u = view.usage;
  const costShown = !agent || gates(agent).cost;
  const atLeast = view.resets.length > 0 ? "≥ " : "";
  return (
    <p
      className="flex flex-wrap gap-x-3 text-sm"
      data-testid="session-usage"
      data-input-tokens={u.inputTokens}
      data-output-tokens={u.outputTokens}
      data-cost={costShown ? u.cost : undefined}
      data-partial={view.resets.length > 0 ? "true" : "false"}
    >
      <span className="font-semibold">Usage</span>
      <span>
        {atLeast}
        {u.inputTokens.toLocaleString()} tokens in / {u.outputTokens.toLocaleString()} out
        {u.cacheTokens > 0 && ` (+${u.cacheTokens.toLocaleString()} cached)`}
      </span>
      <span data-testid="session-cost">
        {costShown ? (
          <>
            cost {atLeast}
            {formatCost(u.cost)}
          </>
        ) : (
          `cost: not reported by ${agent?.name ?? "this agent CLI"}`
        )}
      </span>
      <span className="text-slate-600 dark:text-slate-400">
        {u.responses} response(s){view.resets.length > 0 && ", not counting what the reset skipped"}
      </span>
    </p>
  );
}

// PromptBox is the controller's prompt: text, attachments as workspace
// paths or as files chosen or dropped here, which are uploaded into the
// session's workspace at once (POST …/attachments) and named in the
// prompt. Images go to the model as images; on an agent CLI without the
// image_input capability the picker takes no images.
function PromptBox({
  disabled,
  responding,
  onSend,
  upload,
  images,
  agentName,
}: {
  disabled: boolean;
  responding: boolean;
  onSend: Send;
  upload: (f: File) => Promise<string>;
  images: boolean;
  agentName: string | undefined;
}) {
  const [text, setText] = useState("");
  const [attach, setAttach] = useState("");
  const [uploaded, setUploaded] = useState<{ name: string; path: string }[]>([]);
  const [uploading, setUploading] = useState(0);
  const [uploadError, setUploadError] = useState<string>();
  const [dragging, setDragging] = useState(false);
  const fileInput = useRef<HTMLInputElement>(null);
  const promptRef = useRef<HTMLTextAreaElement>(null);
  const sendRef = useRef<HTMLButtonElement>(null);
  const interruptRef = useRef<HTMLButtonElement>(null);
  // Send and Interrupt are disabled once they have done their work (the
  // prompt box emptied, the response over): the focus they held went to
  // <body>, the next Tab to the top of the window. It goes to the prompt.
  const lostFocus = (from: HTMLElement | null) => {
    const a = document.activeElement;
    return !a || a === document.body || a === from;
  };
  // An attached file removed: the next one's Remove (or the previous
  // one's, or the file picker) takes the focus its button held (it went
  // to <body>).
  const removed = useRef<number | null>(null);
  const attachedList = useRef<HTMLUListElement>(null);
  useEffect(() => {
    const i = removed.current;
    if (i === null) return;
    removed.current = null;
    const buttons = [...(attachedList.current?.querySelectorAll("button") ?? [])];
    (buttons[i] ?? buttons[i - 1] ?? fileInput.current)?.focus();
  }, [uploaded]);
  const interrupting = useRef(false);
  useLayoutEffect(() => {
    if (responding || !interrupting.current) return;
    interrupting.current = false;
    if (lostFocus(interruptRef.current)) promptRef.current?.focus();
  }, [responding]);
  async function addFiles(list: FileList | null) {
    const files = [...(list ?? [])];
    setUploadError(undefined);
    const refused = files.filter((f) => !images && f.type.startsWith("image/"));
    if (refused.length > 0) setUploadError(`${agentName ?? "This agent CLI"} takes no images: ${refused.map((f) => f.name).join(", ")} left out`);
    for (const f of files) {
      if (refused.includes(f)) continue;
      setUploading((n) => n + 1);
      try {
        const path = await upload(f);
        setUploaded((u) => [...u, { name: f.name, path }]);
      } catch (e) {
        setUploadError(e instanceof Error ? e.message : String(e));
      } finally {
        setUploading((n) => n - 1);
      }
    }
    if (fileInput.current) fileInput.current.value = "";
  }
  async function submit(e: FormEvent) {
    e.preventDefault();
    if (!text.trim()) return;
    const msg: Record<string, unknown> = { type: "prompt", content: text };
    const files = [
      ...attach
        .split(",")
        .map((s) => s.trim())
        .filter(Boolean),
      ...uploaded.map((u) => u.path),
    ];
    if (files.length > 0) msg.attachments = files;
    await onSend(msg);
    if (lostFocus(sendRef.current)) promptRef.current?.focus();
    setText("");
    setAttach("");
    setUploaded([]);
  }
  return (
    <form
      onSubmit={submit}
      className={`space-y-2 rounded-lg ${dragging ? "outline-2 outline-dashed outline-sky-600" : ""}`}
      data-testid="prompt-form"
      onDragOver={(e) => {
        if (disabled) return;
        e.preventDefault();
        setDragging(true);
      }}
      onDragLeave={() => setDragging(false)}
      onDrop={(e) => {
        if (disabled) return;
        e.preventDefault();
        setDragging(false);
        void addFiles(e.dataTransfer.files);
      }}
    >
      <label htmlFor="prompt" className="label">
        Prompt
      </label>
      <textarea
        id="prompt"
        ref={promptRef}
        data-testid="prompt"
        className="input min-h-20"
        value={text}
        disabled={disabled}
        onChange={(e) => setText(e.target.value)}
        onKeyDown={(e) => {
          if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) void submit(e);
        }}
      />
      <div className="flex flex-wrap items-center gap-2 text-sm">
        <label htmlFor="attach-files" className="label">
          Attach files (or drop them on the prompt{images ? "; images go to the model as images" : ""})
        </label>
        <input
          id="attach-files"
          ref={fileInput}
          data-testid="attach-files"
          type="file"
          multiple
          accept={images ? undefined : "text/*,.md,.txt,.json,.yaml,.yml,.csv,.go,.ts,.tsx,.js,.py"}
          disabled={disabled}
          className="block text-sm"
          onChange={(e) => void addFiles(e.target.files)}
        />
        {uploading > 0 && <span role="status">uploading…</span>}
      </div>
      {uploaded.length > 0 && (
        <ul ref={attachedList} className="flex flex-wrap gap-1" aria-label="Attached files" data-testid="attached-files">
          {uploaded.map((u, i) => (
            <li key={u.path} className="badge flex min-w-0 max-w-full items-center gap-1 bg-slate-200 whitespace-normal dark:bg-slate-700" data-testid="attached-file" data-path={u.path}>
              {/* A long name wraps: unbroken, it made the page as wide as itself, the prompt box off-screen. */}
              <span className="min-w-0 font-mono wrap-anywhere">{u.name}</span>
              <button
                type="button"
                className="px-1"
                aria-label={`Remove ${u.name}`}
                onClick={() => {
                  removed.current = i;
                  setUploaded((l) => l.filter((x) => x.path !== u.path));
                }}
              >
                ×
              </button>
            </li>
          ))}
        </ul>
      )}
      {uploadError && <Alert testId="attach-error">{uploadError}</Alert>}
      <label htmlFor="attachments" className="label">
        Attachments already in the workspace (paths, comma-separated)
      </label>
      <input id="attachments" data-testid="attachments" className="input" value={attach} disabled={disabled} onChange={(e) => setAttach(e.target.value)} />
      <div className="flex gap-2">
        <button type="submit" ref={sendRef} className="btn btn-primary" disabled={disabled || !text.trim() || uploading > 0} data-testid="send-prompt">
          Send
        </button>
        <button
          type="button"
          ref={interruptRef}
          className="btn"
          disabled={disabled || !responding}
          data-testid="interrupt"
          onClick={() => {
            interrupting.current = true;
            void onSend({ type: "interrupt" });
          }}
        >
          Interrupt
        </button>
      </div>
    </form>
  );
}

// RequestDialog answers the first pending server request: approval
// (approve/deny with a reason), user_input (an answer) or tool_retry
// (retry, skip or abort).
function RequestDialog({ request, onAnswer, onClosed, onAside }: { request: PendingRequest | undefined; onAnswer: Send; onClosed: () => void; onAside: () => void }) {
  const ref = useRef<HTMLDialogElement>(null);
  const [reason, setReason] = useState("");
  useEffect(() => {
    const d = ref.current;
    if (!d) return;
    if (request && !d.open) {
      setReason("");
      if (typeof d.showModal === "function") d.showModal();
      else d.setAttribute("open", "");
    } else if (!request && d.open) {
      if (typeof d.close === "function") d.close();
      else d.removeAttribute("open");
      // Answered: the browser gives the focus back to what held it before
      // the dialog opened; when that is gone (or was <body>), the focus
      // was left on <body> and the next Tab went to the top of the window.
      const a = document.activeElement;
      if (!a || a === document.body || d.contains(a)) onClosed();
    }
  }, [request, onClosed]);
  const base = request ? { type: "server_request_response", request_id: request.requestId, request_type: request.type } : {};
  const answer = (extra: Record<string, unknown>) => void onAnswer({ ...base, ...extra });
  return (
    <dialog
      ref={ref}
      data-testid="request-dialog"
      data-request-type={request?.type}
      aria-labelledby="request-title"
      // Escape sets the request aside, unanswered (the browser's own
      // cancel would close the dialog behind React's back).
      onCancel={(e) => {
        e.preventDefault();
        onAside();
      }}
      onKeyDown={(e) => {
        if (e.key !== "Escape") return;
        e.preventDefault();
        onAside();
      }}
      className="m-auto w-[min(36rem,95vw)] rounded-lg border border-slate-300 bg-white p-4 text-slate-900 backdrop:bg-black/40 dark:border-slate-600 dark:bg-slate-900 dark:text-slate-100"
    >
      {request && (
        <div className="space-y-3">
          <h2 id="request-title" className="font-semibold">
            {request.type === "approval" ? "Approve this tool call?" : request.type === "user_input" ? "The agent asks you" : request.type === "tool_retry" ? "A tool failed: retry?" : `Request: ${request.type}`}
          </h2>
          {/* A tool's name may be one long word (an MCP tool's, mcp__<server>__<tool>): it wraps, or it ran out of the dialog at 390 px. */}
          <p className="text-sm wrap-anywhere">
            <span className="font-mono font-semibold" data-testid="request-tool">
              {request.tool}
            </span>{" "}
            {request.label && request.label !== request.tool && <span>{request.label}</span>}
          </p>
          {request.description && <p className="text-sm wrap-anywhere">{request.description}</p>}
          <pre tabIndex={0} data-testid="request-args" className="max-h-60 overflow-auto rounded bg-slate-100 p-2 text-xs dark:bg-slate-800">
            {JSON.stringify(request.args, null, 2)}
          </pre>
          <label htmlFor="request-reason" className="label">
            {request.type === "user_input" ? "Your answer" : "Reason (optional)"}
          </label>
          <textarea id="request-reason" data-testid="request-reason" className="input" value={reason} onChange={(e) => setReason(e.target.value)} />
          <div className="flex flex-wrap justify-end gap-2">
            {request.type === "approval" && (
              <>
                <button type="button" className="btn btn-danger" data-testid="deny" onClick={() => answer({ approved: false, ...(reason ? { result: { success: false, output: "", error: reason } } : {}) })}>
                  Deny
                </button>
                <button type="button" className="btn btn-primary" data-testid="approve" onClick={() => answer({ approved: true, ...(reason ? { result: { success: true, output: reason } } : {}) })}>
                  Approve
                </button>
              </>
            )}
            {request.type === "user_input" && (
              <>
                <button type="button" className="btn" data-testid="decline" onClick={() => answer({ content: [{ type: "text", text: reason || "Declined" }], is_error: true })}>
                  Decline
                </button>
                <button type="button" className="btn btn-primary" data-testid="answer" onClick={() => answer({ content: [{ type: "text", text: reason }], is_error: false })}>
                  Answer
                </button>
              </>
            )}
            {request.type === "tool_retry" && (
              <>
                <button type="button" className="btn btn-danger" data-testid="retry-abort" onClick={() => answer({ decision_action: "abort", ...(reason ? { reason } : {}) })}>
                  Abort
                </button>
                <button type="button" className="btn" data-testid="retry-skip" onClick={() => answer({ decision_action: "skip", ...(reason ? { reason } : {}) })}>
                  Skip
                </button>
                <button type="button" className="btn btn-primary" data-testid="retry-retry" onClick={() => answer({ decision_action: "retry", ...(reason ? { reason } : {}) })}>
                  Retry
                </button>
              </>
            )}
          </div>
        </div>
      )}
    </dialog>
  );
}

// FilePanel searches the session's workspace and reads a file with the
// utility operations (protocol.md, "Utility operations").
function FilePanel({ send, utility }: { send: Send; utility: Record<string, Record<string, unknown>> }) {
  const [query, setQuery] = useState("");
  const [searchId, setSearchId] = useState<string>();
  const [readId, setReadId] = useState<string>();
  const n = useRef(0);
  const results = searchId ? utility[searchId] : undefined;
  const file = readId ? utility[readId] : undefined;
  const hits = (results?.results as { path: string }[] | undefined) ?? [];
  return (
    <aside aria-labelledby="files-title" className="card space-y-2" data-testid="file-panel">
      <h2 id="files-title" className="text-sm font-semibold">
        Workspace files
      </h2>
      <form
        className="flex gap-1"
        onSubmit={(e) => {
          e.preventDefault();
          const id = `web_search_${++n.current}`;
          setSearchId(id);
          void send({ type: "utility_file_search", search_id: id, query, limit: 50 });
        }}
      >
        <label htmlFor="file-query" className="sr-only">
          Search files
        </label>
        <input id="file-query" data-testid="file-query" className="input" value={query} placeholder="file name…" onChange={(e) => setQuery(e.target.value)} />
        <button type="submit" className="btn">
          Search
        </button>
      </form>
      {results && results.type === "error" && <p className="text-xs text-red-700 wrap-anywhere dark:text-red-400">{String(results.message)}</p>}
      <ul className="max-h-48 overflow-auto text-xs" data-testid="file-results">
        {hits.map((h) => (
          <li key={h.path}>
            <button
              type="button"
              // The whole path, wrapped: cut short, the files of one deep directory looked alike.
              className="w-full text-left font-mono text-sky-700 wrap-anywhere hover:underline dark:text-sky-400"
              onClick={() => {
                const id = `web_read_${++n.current}`;
                setReadId(id);
                void send({ type: "utility_file_read", read_id: id, path: h.path, limit: 400 });
              }}
            >
              {h.path}
            </button>
          </li>
        ))}
        {results && results.type !== "error" && hits.length === 0 && <li>No match.</li>}
      </ul>
      {file && (
        <div>
          <p className="font-mono text-xs font-semibold wrap-anywhere">
            {String(file.relative_path ?? file.path ?? "")}
            {file.type === "error" ? `: ${String(file.message)}` : ` (lines ${String(file.start_line)}–${String(file.end_line)} of ${String(file.total_lines)})`}
          </p>
          {file.type !== "error" && (
            <pre tabIndex={0} data-testid="file-content" className="max-h-80 overflow-auto rounded bg-slate-100 p-2 text-xs dark:bg-slate-800">
              {String(file.content ?? "")}
            </pre>
          )}
        </div>
      )}
    </aside>
  );
}
