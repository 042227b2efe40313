import { useEffect, useRef, useState } from "react";
import { Link, useParams } from "react-router";
import { useQuery, useQueryClient } from "@tanstack/react-query";
import { useApi } from "../api/context";
import { ApiError, unwrap } from "../api/client";
import { finishedStates, type Comment, type Job } from "../api/types";
import { useJobLog } from "../lib/useJobLog";
import { executorOf, useServerInfo } from "../lib/queries";
import { formatCost, stateLabel } from "../lib/format";
import { useTitle } from "../lib/title";
import { ExecutorBadge, StatusBadge } from "../components/Badges";
import { EventLogView } from "../components/EventLog";
import { QuestionPanel } from "../components/QuestionPanel";
import { ConfirmDialog } from "../components/ConfirmDialog";
import { Deliverables } from "../components/Deliverables";
import { Markdown } from "../components/Markdown";
import { Alert, Section, TextAreaField } from "../components/Field";

// TaskMissing is the page of a task that cannot be shown (no such task, a
// bad id, an error): it said only "get task 99: not found" or "Bad task
// id.", with no title and no way on but the navigation.
function TaskMissing({ id, children }: { id: string; children: string }) {
  return (
    <div className="space-y-3" aria-labelledby="task-title">
      <h1 id="task-title" className="text-xl font-semibold">
        Task <span className="font-mono text-base break-all">{id}</span>
      </h1>
      <Alert testId="task-missing">{children}</Alert>
      <Link to="/" className="btn" data-testid="task-missing-list">
        All tasks
      </Link>
    </div>
  );
}

export default function TaskDetail() {
  const { id } = useParams();
  const taskId = Number(id);
  const api = useApi();
  const qc = useQueryClient();
  const server = useServerInfo();
  const [confirm, setConfirm] = useState<"cancel" | "retry" | null>(null);
  const [actionError, setActionError] = useState<string | null>(null);

  const task = useQuery({
    queryKey: ["task", taskId],
    enabled: Number.isSafeInteger(taskId) && taskId > 0,
    queryFn: async () => unwrap(await api.client.GET("/api/v1/tasks/{id}", { params: { path: { id: taskId } } })),
    refetchInterval: (q) => (q.state.data && finishedStates.has(q.state.data.task.job_state ?? "") ? 15_000 : 2_000),
  });
  const t = task.data?.task;
  const jobs = task.data?.jobs ?? [];
  const job = jobs.find((j) => j.id === t?.job_id) ?? jobs[jobs.length - 1];
  const log = useJobLog(job?.id, job ? finishedStates.has(job.state) : false);

  // A status event in the stream means the task's state changed: refetch.
  const lastStatus = log.items.reduce((n, it) => (it.kind === "status" ? it.id : n), 0);
  useEffect(() => {
    if (lastStatus > 0) void qc.invalidateQueries({ queryKey: ["task", taskId] });
  }, [lastStatus, qc, taskId]);

  const subtasks = useQuery({
    queryKey: ["subtasks", taskId, jobs.map((j) => j.id).join(",")],
    enabled: jobs.length > 0,
    refetchInterval: 10_000,
    // The task's jobs change (a job added): the tree stays shown while the
    // new key loads (it vanished for a fetch). Another task's is never kept.
    placeholderData: (prev, prevQuery) => (prevQuery?.queryKey[1] === taskId ? prev : undefined),
    queryFn: async () => {
      const ids = new Set(jobs.map((j) => j.id));
      const first = Math.min(...ids);
      const r = unwrap(await api.client.GET("/api/v1/jobs", { params: { query: { after: first, limit: 1000 } } }));
      return r.jobs.filter((j) => j.parent_job_id !== undefined && ids.has(j.parent_job_id));
    },
  });

  // The question answered, its panel goes (the job is queued again) with
  // the focus it held: it went to <body>, the next Tab to the top of the
  // window. The log, where the agent goes on, takes it.
  const asking = task.data?.task !== undefined && (job?.state ?? task.data.task.job_state) === "waiting_human";
  const wasAsking = useRef(false);
  useEffect(() => {
    const was = wasAsking.current;
    wasAsking.current = asking;
    if (!was || asking) return;
    const a = document.activeElement;
    if (!a || a === document.body || !a.isConnected) document.querySelector<HTMLElement>('[data-testid="event-log"]')?.focus();
  }, [asking]);

  // The tab says which task and its state: "waiting for you" shows in the
  // tab strip while the user is in another tab.
  const tabState = job?.state ?? task.data?.task.job_state;
  useTitle(task.data ? `#${task.data.task.id} ${task.data.task.title} (${stateLabel(tabState)})` : undefined);

  if (!Number.isSafeInteger(taskId) || taskId <= 0)
    return <TaskMissing id={id ?? ""}>{`${id ?? ""} is not a task id: a task's address is /tasks/ and its number.`}</TaskMissing>;
  if (task.isPending) return <p className="text-sm">Loading task…</p>;
  // Only a task never shown is replaced by its error: a poll that fails
  // once the task is shown (the server stopped mid-task) made the whole page
  // "Task 5 / The server does not answer…", the log and question gone and
  // the answer or comment being written lost. The page stays, with the
  // error above it, and polls on.
  if (task.error && !task.data)
    return (
      <TaskMissing id={id ?? ""}>
        {task.error instanceof ApiError && task.error.status === 404 ? `This server has no task ${taskId}: the link is wrong, or it is another server's.` : task.error.message}
      </TaskMissing>
    );
  if (!t) return null;

  const state = job?.state ?? t.job_state;
  const comments = task.data.comments;
  const question =
    state === "waiting_human"
      ? ([...comments].reverse().find((c) => c.author_kind === "agent")?.body ?? job?.wait_reason ?? "The job is waiting for an answer.")
      : null;
  const canCancel = job !== undefined && !finishedStates.has(job.state);
  const canRetry = job !== undefined && ["failed", "aborted", "cancelled"].includes(job.state);

  async function act(kind: "cancel" | "retry") {
    setConfirm(null);
    setActionError(null);
    if (!job) return;
    try {
      if (kind === "cancel")
        unwrap(await api.client.POST("/api/v1/jobs/{id}/cancel", { params: { path: { id: job.id } }, body: {} }));
      else unwrap(await api.client.POST("/api/v1/jobs/{id}/retry", { params: { path: { id: job.id } }, body: {} }));
      await qc.invalidateQueries({ queryKey: ["task", taskId] });
    } catch (err) {
      setActionError(err instanceof Error ? err.message : String(err));
    }
  }

  async function answer(body: string) {
    unwrap(await api.client.POST("/api/v1/tasks/{id}/comments", { params: { path: { id: taskId } }, body: { body } }));
    await qc.invalidateQueries({ queryKey: ["task", taskId] });
  }

  return (
    <article className="space-y-4" aria-labelledby="task-title">
      <header className="space-y-2">
        <div className="flex flex-wrap items-center gap-2">
          <h1 id="task-title" data-testid="task-title" className="mr-auto min-w-0 text-xl font-semibold wrap-anywhere">
            <span className="text-slate-500 dark:text-slate-400">#{t.id}</span> {t.title}
          </h1>
          {/* One button, Cancel or Retry (never both): cancelling makes it
              Retry and retrying makes it Cancel, the same control, so the
              focus stays on it. Two buttons, one replacing the other, left
              the focus on <body> after each. */}
          {(canCancel || canRetry) && (
            <button
              type="button"
              className="btn"
              data-testid={canCancel ? "cancel-task" : "retry-task"}
              onClick={() => setConfirm(canCancel ? "cancel" : "retry")}
            >
              {canCancel ? "Cancel" : "Retry"}
            </button>
          )}
        </div>
        <div className="flex flex-wrap items-center gap-3 text-sm">
          <StatusBadge state={state} testId="task-status" />
          <ExecutorBadge executor={executorOf(job, server.data, log.executor)} />
          {log.model && <span className="min-w-0 text-xs text-slate-600 wrap-anywhere dark:text-slate-400">{log.model}</span>}
          <span className="min-w-0 text-xs wrap-anywhere">piece {t.job_piece || t.piece || "auto"}</span>
          <span data-testid="task-cost" className="text-xs" title="cost of the job so far">
            cost {formatCost(log.totalCost)}
          </span>
          {job && <span className="text-xs">job #{job.id}, attempt {job.attempt}/{job.max_attempts}</span>}
        </div>
        {job?.error && (
          <p className="error whitespace-pre-wrap" data-testid="job-error">
            {job.error}
          </p>
        )}
        {task.error && (
          <Alert testId="task-unreachable">
            {task.error.message} The page shows the task as it last was and tries again.
          </Alert>
        )}
        {actionError && (
          <p className="error" role="alert">
            {actionError}
          </p>
        )}
      </header>

      {question !== null && <QuestionPanel question={question} onAnswer={answer} />}

      {t.body && (
        <details className="card" open={!job || jobs.length === 0}>
          <summary className="cursor-pointer text-sm font-semibold">Description</summary>
          <Markdown text={t.body} />
        </details>
      )}

      <div className="grid grid-cols-[minmax(0,1fr)] gap-4 lg:grid-cols-[minmax(0,1fr)_16rem]">
        <section aria-labelledby="log-h">
          <h2 id="log-h" className="mb-1 text-sm font-semibold">
            Live log
          </h2>
          <EventLogView log={log} />
        </section>
        <aside aria-labelledby="timeline-h" className="space-y-2">
          <h2 id="timeline-h" className="text-sm font-semibold">
            Movements
          </h2>
          <ol className="space-y-1">
            {log.movements.map((m) => (
              <li key={m.id} data-testid="movement" className="card p-2 text-xs wrap-anywhere">
                <p className="font-semibold">
                  {m.number}. {m.name}
                </p>
                <p>
                  {m.toolCalls} tool call(s){m.failed ? `, ${m.failed} failed` : ""}
                </p>
                <p>
                  {m.inputTokens.toLocaleString()} in / {m.outputTokens.toLocaleString()} out · {formatCost(m.cost)}
                </p>
              </li>
            ))}
            {log.movements.length === 0 && <li className="text-xs text-slate-600 dark:text-slate-400">None yet.</li>}
          </ol>
          <p className="text-xs font-semibold">Total {formatCost(log.totalCost)}</p>
        </aside>
      </div>

      <Section id="deliv-h" title="Deliverables">
        <Deliverables taskId={taskId} refreshKey={`${state}:${log.ended?.last_seq ?? ""}`} />
      </Section>

      {(subtasks.data?.length ?? 0) > 0 && (
        <Section id="sub-h" title="Subtasks">
          <SubtaskTree jobs={subtasks.data ?? []} />
        </Section>
      )}

      <Section id="comments-h" title="Comments">
        <Comments comments={comments} onSend={answer} />
      </Section>

      <ConfirmDialog
        open={confirm !== null}
        title={confirm === "cancel" ? "Cancel this task's job?" : "Retry this task's job?"}
        message={
          confirm === "cancel"
            ? "The worker running it stops; this cannot be undone (you can retry afterwards)."
            : "The job is queued again with one more attempt."
        }
        confirmLabel={confirm === "cancel" ? "Cancel job" : "Retry job"}
        onConfirm={() => confirm && void act(confirm)}
        onCancel={() => setConfirm(null)}
      />
    </article>
  );
}

function SubtaskTree({ jobs }: { jobs: Job[] }) {
  return (
    <ul className="space-y-1">
      {jobs.map((j) => (
        <li key={j.id} data-testid="subtask-row" className="flex items-center gap-2 text-sm">
          <span aria-hidden>└</span>
          {j.task_id ? (
            <Link to={`/tasks/${j.task_id}`} className="text-sky-800 hover:underline dark:text-sky-300">
              task #{j.task_id} (job #{j.id})
            </Link>
          ) : (
            <span>job #{j.id}</span>
          )}
          <StatusBadge state={j.state} />
          {j.piece && <span className="min-w-0 text-xs wrap-anywhere">{j.piece}</span>}
        </li>
      ))}
    </ul>
  );
}

function Comments({ comments, onSend }: { comments: Comment[]; onSend: (body: string) => Promise<void> }) {
  const [body, setBody] = useState("");
  const [error, setError] = useState<string | null>(null);
  // Busy while it sends, as the answer's button: a second press (a double
  // click, Enter twice) posted the comment twice. aria-disabled, not
  // disabled, so that the focus stays on it.
  const [busy, setBusy] = useState(false);
  return (
    <div className="space-y-2">
      <ul className="space-y-2">
        {comments.map((c) => (
          <li key={c.id} data-testid="comment-item" className="text-sm">
            <p className="text-xs text-slate-600 dark:text-slate-400">
              {c.author_kind}
              {c.author ? ` (${c.author})` : ""} · {new Date(c.created_at).toLocaleString()}
            </p>
            <Markdown text={c.body} />
          </li>
        ))}
        {comments.length === 0 && <li className="text-sm text-slate-600 dark:text-slate-400">No comments.</li>}
      </ul>
      <form
        className="space-y-2"
        onSubmit={async (e) => {
          e.preventDefault();
          if (!body.trim() || busy) return;
          setBusy(true);
          try {
            await onSend(body);
            setBody("");
            setError(null);
          } catch (err) {
            setError(err instanceof Error ? err.message : String(err));
          } finally {
            setBusy(false);
          }
        }}
      >
        <TextAreaField
          id="comment-input"
          label="Add a comment"
          className="min-h-16"
          value={body}
          onChange={setBody}
          after={error && <Alert testId="comment-error">{error}</Alert>}
        />
        <button type="submit" className="btn" data-testid="comment-submit" aria-disabled={busy || undefined}>
          {busy ? "Sending…" : "Comment"}
        </button>
      </form>
    </div>
  );
}
