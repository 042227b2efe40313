import { useEffect, useRef, useState } from "react";
import { Link, useSearchParams } from "react-router";
import { keepPreviousData, useQuery } from "@tanstack/react-query";
import { useApi } from "../api/context";
import { unwrap } from "../api/client";
import { states, type Job, type ServerInfo, type Task } from "../api/types";
import { executorOf, useServerInfo } from "../lib/queries";
import { formatCost, formatDuration, relativeTime, stateLabel } from "../lib/format";
import { ExecutorBadge, StatusBadge } from "../components/Badges";
import { Alert, InputField, PageHeader, SelectField } from "../components/Field";

const pageSize = 50;
const stateOptions = [{ value: "", label: "all" }, ...states.map((s) => ({ value: s, label: stateLabel(s) }))];
const refreshMs = 3000;
// searchDelayMs: typing waits this long after the last key before it asks
// the server.
export const searchDelayMs = 250;

// useDebounced is value once it has stayed the same for ms.
function useDebounced<T>(value: T, ms: number): T {
  const [settled, setSettled] = useState(value);
  useEffect(() => {
    const id = setTimeout(() => setSettled(value), ms);
    return () => clearTimeout(id);
  }, [value, ms]);
  return settled;
}

// TaskList pages through GET /api/v1/tasks (newest first, `before` cursor)
// and refetches the visible page every few seconds. The state filter and the
// text search (debounced) go to the server as `state` and `q`, so they apply
// to every task, not just the page shown; changing either starts again at the
// first page. Each page is one indexed query however many tasks there are
// (docs/api.md). The filter, the search and the page live in the address
// (?state=&q=&pages=), so the browser's Back from a task, a reload or a
// shared link shows the same list: they were lost on leaving the page.
export function TaskList() {
  const api = useApi();
  const [params, setParams] = useSearchParams();
  const stateFilter = params.get("state") ?? "";
  const urlQ = params.get("q") ?? "";
  // The `before` of each page after the first, for the filter they were
  // paged under (a new filter starts at the first page).
  const cursors = (params.get("pages") ?? "")
    .split(",")
    .map(Number)
    .filter((n) => Number.isInteger(n) && n > 0);
  // The controls show what was chosen at once (the address follows in a
  // transition), and what the address says when it changes from outside
  // (Back, a link): a value of the address that is not the one this page
  // last wrote.
  const [search, setSearch] = useState(urlQ);
  const [stateShown, setStateShown] = useState(stateFilter);
  const q = useDebounced(search.trim(), searchDelayMs);
  const written = useRef({ q: urlQ, state: stateFilter });
  useEffect(() => {
    if (urlQ !== written.current.q) {
      written.current.q = urlQ;
      setSearch(urlQ);
    }
  }, [urlQ]);
  useEffect(() => {
    if (stateFilter !== written.current.state) {
      written.current.state = stateFilter;
      setStateShown(stateFilter);
    }
  }, [stateFilter]);
  const update = (next: { state?: string; q?: string; cursors?: number[] }, push = false) => {
    const st = next.state ?? written.current.state;
    const qq = next.q ?? written.current.q;
    const cs = next.cursors ?? [];
    written.current = { q: qq, state: st };
    const p = new URLSearchParams();
    if (st) p.set("state", st);
    if (qq) p.set("q", qq);
    if (cs.length) p.set("pages", cs.join(","));
    setParams(p, { replace: !push });
  };
  // The debounced search reaches the address once it settles.
  useEffect(() => {
    if (q !== written.current.q && q === search.trim()) update({ q });
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [q]);
  const setStateFilter = (st: string) => {
    setStateShown(st);
    update({ state: st });
  };
  const setCursors = (f: (c: number[]) => number[]) => update({ cursors: f(cursors) }, true);
  const before = cursors[cursors.length - 1];

  const tasks = useQuery({
    queryKey: ["tasks", before ?? 0, stateFilter, urlQ],
    queryFn: async () =>
      unwrap(
        await api.client.GET("/api/v1/tasks", {
          params: {
            query: {
              limit: pageSize,
              ...(before ? { before } : {}),
              ...(stateFilter ? { state: stateFilter } : {}),
              ...(urlQ ? { q: urlQ } : {}),
            },
          },
        }),
      ),
    refetchInterval: refreshMs,
    placeholderData: keepPreviousData,
  });

  // The jobs of the page, for the executor their payload asks before they
  // start (and duration from an older server): one query over the page's
  // range of job ids (of the filtered state only, when there is one:
  // a filtered page's jobs are further apart).
  const jobIds = (tasks.data?.tasks ?? []).map((t) => t.job_id ?? 0).filter((n) => n > 0);
  const lo = jobIds.length ? Math.min(...jobIds) : 0;
  const hi = jobIds.length ? Math.max(...jobIds) : 0;
  const jobs = useQuery({
    queryKey: ["jobs-range", lo, hi, stateFilter],
    enabled: hi > 0,
    queryFn: async () => {
      const r = unwrap(
        await api.client.GET("/api/v1/jobs", {
          params: { query: { after: lo - 1, limit: Math.min(1000, hi - lo + 1), ...(stateFilter ? { state: stateFilter } : {}) } },
        }),
      );
      return new Map(r.jobs.map((j) => [j.id, j]));
    },
    refetchInterval: refreshMs,
    placeholderData: keepPreviousData,
  });
  const server = useServerInfo();

  const rows = tasks.data?.tasks ?? [];

  const next = tasks.data?.next_before;
  // Newer on page 2 (or Older on the last page) is disabled once it has
  // done its work: the focus it held went to <body>. The other one takes it.
  const prevRef = useRef<HTMLButtonElement>(null);
  const nextRef = useRef<HTMLButtonElement>(null);
  const paged = useRef<"prev" | "next" | null>(null);
  const atFirst = cursors.length === 0;
  const atLast = !next;
  useEffect(() => {
    const which = paged.current;
    if (!which || tasks.isFetching) return;
    paged.current = null;
    const [mine, other] = which === "prev" ? [prevRef.current, nextRef.current] : [nextRef.current, prevRef.current];
    const a = document.activeElement;
    if (mine?.disabled && (!a || a === document.body || a === mine) && other && !other.disabled) other.focus();
  }, [atFirst, atLast, tasks.isFetching]);
  return (
    <section aria-labelledby="tasks-h" className="space-y-3">
      <PageHeader id="tasks-h" title="Tasks">
        <Link to="/tasks/new" className="btn btn-primary" data-testid="new-task-button">
          New task
        </Link>
      </PageHeader>
      <div className="flex flex-wrap items-end gap-2">
        <SelectField id="task-filter-state" label="State" value={stateShown} options={stateOptions} onChange={setStateFilter} />
        <div className="min-w-0 flex-1">
          <InputField id="task-search" label="Search" type="search" placeholder="title, body or id" value={search} onChange={setSearch} />
        </div>
      </div>
      {tasks.error && <Alert testId="task-list-error">{tasks.error.message}</Alert>}
      <TaskTable tasks={rows} jobs={jobs.data} server={server.data} loading={tasks.isPending} filtered={!!(stateFilter || urlQ)} />
      <nav aria-label="Pages" className="flex items-center gap-2">
        <button
          type="button"
          className="btn"
          data-testid="page-prev"
          ref={prevRef}
          disabled={cursors.length === 0}
          onClick={() => {
            paged.current = "prev";
            setCursors((c) => c.slice(0, -1));
          }}
        >
          ← Newer
        </button>
        <span className="text-sm text-slate-600 dark:text-slate-400">Page {cursors.length + 1}</span>
        <button
          type="button"
          className="btn"
          data-testid="page-next"
          ref={nextRef}
          disabled={!next}
          onClick={() => {
            if (!next) return;
            paged.current = "next";
            setCursors((c) => [...c, next]);
          }}
        >
          Older →
        </button>
      </nav>
    </section>
  );
}

export interface TaskTableProps {
  tasks: Task[];
  jobs: Map<number, Job> | undefined;
  server: ServerInfo | undefined;
  loading?: boolean;
  // filtered: a state or a search chose the rows (none matching is not a
  // server without tasks).
  filtered?: boolean;
  now?: number;
}

export function TaskTable({ tasks, jobs, server, loading, filtered, now }: TaskTableProps) {
  if (loading) return <p className="text-sm">Loading tasks…</p>;
  return (
    <ul data-testid="task-list" className="divide-y divide-slate-200 rounded-lg border border-slate-200 bg-white dark:divide-slate-800 dark:border-slate-800 dark:bg-slate-900">
      {/* A new server's list said only "No tasks.", not how to give one. */}
      {tasks.length === 0 && (
        <li className="p-3 text-sm text-slate-600 dark:text-slate-400" data-testid="task-list-empty">
          {filtered ? (
            "No tasks. None is in this state or matches this search."
          ) : (
            <>
              No tasks yet.{" "}
              <Link to="/tasks/new" className="text-sky-800 underline dark:text-sky-300">
                New task
              </Link>{" "}
              gives the agent its first one: a title, what to do, files if it needs them. It shows here as it runs.
            </>
          )}
        </li>
      )}
      {tasks.map((t) => {
        const job = t.job_id ? jobs?.get(t.job_id) : undefined;
        // The task carries its latest job's times, executor, model and
        // cost (GET /api/v1/tasks); the page's jobs add what their payload
        // asks before they start.
        const attempted = t.job_attempted_at ?? job?.attempted_at;
        const finished = t.job_finished_at ?? job?.finished_at;
        const dur = attempted ? (finished ? Date.parse(finished) : (now ?? Date.now())) - Date.parse(attempted) : NaN;
        const seen = t.job_agent ? "agent-cli" : t.job_executor;
        const runsOn = t.job_agent || t.job_model;
        return (
          <li
            key={t.id}
            data-testid="task-row"
            data-task-id={t.id}
            data-job-id={t.job_id ?? ""}
            data-status={t.job_state ?? ""}
            className="flex flex-wrap items-center gap-x-3 gap-y-1 p-3"
          >
            {/* The title and the model are cut to a line: their tooltips hold them whole. */}
            <Link to={`/tasks/${t.id}`} title={t.title} className="min-w-0 flex-1 basis-60 truncate font-medium text-sky-800 hover:underline dark:text-sky-300">
              <span className="text-slate-500 dark:text-slate-400">#{t.id}</span> {t.title}
            </Link>
            <StatusBadge state={t.job_state} />
            <ExecutorBadge executor={executorOf(job, server, seen)} />
            <span className="min-w-0 text-xs text-slate-600 wrap-anywhere dark:text-slate-400" title="piece">
              {t.job_piece || t.piece || "auto"}
            </span>
            <span className="max-w-40 truncate text-xs text-slate-600 dark:text-slate-400" title={`${t.job_agent ? "agent CLI" : "model"}${runsOn ? `: ${runsOn}` : ""}`} data-testid="task-model">
              {runsOn || "—"}
            </span>
            <span className="text-xs text-slate-600 dark:text-slate-400" title="cost" data-testid="task-row-cost">
              {t.job_cost_usd !== undefined || t.job_executor ? formatCost(t.job_cost_usd ?? 0) : "—"}
            </span>
            <span className="text-xs text-slate-600 dark:text-slate-400" title="duration">
              {formatDuration(dur)}
            </span>
            <span className="text-xs text-slate-600 dark:text-slate-400" title={`updated ${t.updated_at}`}>
              {relativeTime(t.updated_at, now)}
            </span>
          </li>
        );
      })}
    </ul>
  );
}
