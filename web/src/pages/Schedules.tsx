import { useEffect, useLayoutEffect, useRef, useState, type FormEvent } from "react";
import { useQuery, useQueryClient } from "@tanstack/react-query";
import { useApi } from "../api/context";
import { usePieceOptions } from "../lib/queries";
import { ApiError, unwrap } from "../api/client";
import type { Schedule } from "../api/types";
import { explainCron } from "../lib/cron";
import { relativeTime } from "../lib/format";
import { Alert, CheckboxField, InputField, PageHeader, SelectField, TextAreaField } from "../components/Field";

interface Draft {
  name: string;
  cron_expr: string;
  title: string;
  body: string;
  piece: string;
  enabled: boolean;
}

const blank: Draft = { name: "", cron_expr: "0 9 * * 1", title: "", body: "", piece: "", enabled: true };

export default function Schedules() {
  const api = useApi();
  const qc = useQueryClient();
  const [editing, setEditing] = useState<{ id?: number; draft: Draft } | null>(null);
  const [rowError, setRowError] = useState<string | null>(null);
  // The form opens above the list and closes on Save, Close or Delete:
  // opening it from a row's Edit left the focus on that row (the form out
  // of Tab's way, behind it), and closing it left the focus on <body>. The
  // form's first field takes the focus when it opens; when it closes, the
  // control that opened it gets it back (New schedule when that was a row
  // now deleted).
  const opener = useRef<Element | null>(null);
  const newButton = useRef<HTMLButtonElement>(null);
  const open = (e: { id?: number; draft: Draft }) => {
    opener.current = document.activeElement;
    setEditing(e);
  };
  const close = () => setEditing(null);
  const isOpen = editing !== null;
  const wasOpen = useRef(false);
  useEffect(() => {
    const was = wasOpen.current;
    wasOpen.current = isOpen;
    // Only when the form closes: not when the page opens.
    if (isOpen || !was) return;
    const a = document.activeElement;
    if (a && a !== document.body && a.isConnected) return;
    const back = opener.current instanceof HTMLElement && opener.current.isConnected ? opener.current : newButton.current;
    back?.focus();
    opener.current = null;
  }, [isOpen]);
  const list = useQuery({
    queryKey: ["schedules"],
    queryFn: async () => unwrap(await api.client.GET("/api/v1/schedules")),
    refetchInterval: 10_000,
  });

  async function toggle(s: Schedule) {
    setRowError(null);
    try {
      unwrap(
        await api.client.PUT("/api/v1/schedules/{id}", {
          params: { path: { id: s.id } },
          body: toBody({ ...fromSchedule(s), enabled: !s.enabled }),
        }),
      );
      await qc.invalidateQueries({ queryKey: ["schedules"] });
    } catch (err) {
      setRowError(err instanceof Error ? err.message : String(err));
    }
  }

  const schedules = list.data?.schedules ?? [];
  return (
    <section aria-labelledby="sched-h" className="space-y-3">
      <PageHeader id="sched-h" title="Schedules">
        <button type="button" ref={newButton} className="btn btn-primary" data-testid="new-schedule-button" onClick={() => open({ draft: { ...blank } })}>
          New schedule
        </button>
      </PageHeader>
      {list.error && <p className="error">{list.error.message}</p>}
      {rowError && (
        <p className="error" role="alert">
          {rowError}
        </p>
      )}
      {editing && (
        <ScheduleForm
          key={editing.id ?? "new"}
          id={editing.id}
          initial={editing.draft}
          onDone={async () => {
            // The list as it is now, then the form closes: a deleted
            // schedule's row (and Edit) is gone by the time the focus
            // comes back.
            await qc.invalidateQueries({ queryKey: ["schedules"] });
            close();
          }}
          onCancel={close}
        />
      )}
      <ul data-testid="schedule-list" className="divide-y divide-slate-200 rounded-lg border border-slate-200 bg-white dark:divide-slate-800 dark:border-slate-800 dark:bg-slate-900">
        {/* "No schedules." said neither what one is nor how to make it. */}
        {schedules.length === 0 && (
          <li className="p-3 text-sm" data-testid="schedule-list-empty">
            {list.isPending
              ? "Loading schedules…"
              : "No schedules yet. A schedule submits a task at the times of a cron expression (every Monday at 9, say): New schedule makes the first."}
          </li>
        )}
        {schedules.map((s) => (
          <li key={s.id} data-testid="schedule-row" data-schedule-id={s.id} data-enabled={s.enabled ? "true" : "false"} className="flex flex-wrap items-center gap-x-3 gap-y-1 p-3">
            <span className="min-w-0 flex-1 basis-48 wrap-anywhere">
              <span className="font-medium">{s.name}</span>{" "}
              <span className="font-mono text-xs text-slate-600 dark:text-slate-400">{s.cron_expr}</span>
              {/* Cut to a line: the whole title is its tooltip (and in Edit). */}
              <span className="block truncate text-xs text-slate-600 dark:text-slate-400" title={s.title}>
                {explainCron(s.cron_expr).words} · {s.title}
              </span>
            </span>
            <span className="text-xs" title={s.next_run_at}>
              next {s.enabled ? new Date(s.next_run_at).toLocaleString() : "—"}
            </span>
            <span className="text-xs">last {relativeTime(s.last_fired_at)}</span>
            <button type="button" className="btn px-2 py-0.5" data-testid="schedule-toggle" aria-pressed={s.enabled} aria-label={`${s.enabled ? "Disable" : "Enable"} ${s.name}`} onClick={() => void toggle(s)}>
              {s.enabled ? "Disable" : "Enable"}
            </button>
            <button type="button" className="btn px-2 py-0.5" aria-label={`Edit ${s.name}`} onClick={() => open({ id: s.id, draft: fromSchedule(s) })}>
              Edit
            </button>
          </li>
        ))}
      </ul>
    </section>
  );
}

function fromSchedule(s: Schedule): Draft {
  return { name: s.name, cron_expr: s.cron_expr, title: s.title, body: s.body ?? "", piece: s.piece ?? "", enabled: s.enabled };
}

function toBody(d: Draft) {
  return {
    name: d.name,
    cron_expr: d.cron_expr,
    title: d.title,
    enabled: d.enabled,
    ...(d.body ? { body: d.body } : {}),
    ...(d.piece ? { piece: d.piece } : {}),
  };
}

function ScheduleForm({ id, initial, onDone, onCancel }: { id?: number; initial: Draft; onDone: () => Promise<void>; onCancel: () => void }) {
  const api = useApi();
  const [d, setD] = useState<Draft>(initial);
  const [error, setError] = useState<{ message: string; field?: string } | null>(null);
  const [confirmDelete, setConfirmDelete] = useState(false);
  const pieceOptions = usePieceOptions();
  // Opened: the first field takes the focus (the form is above the list).
  useLayoutEffect(() => {
    document.getElementById("schedule-name")?.focus();
  }, []);
  // Refused: the field at fault takes the focus (it stayed on Save, the
  // error under a field above it).
  useLayoutEffect(() => {
    const id = { name: "schedule-name", cron_expr: "schedule-cron", title: "schedule-title", body: "schedule-body", piece: "schedule-piece" }[error?.field ?? ""];
    if (id) document.getElementById(id)?.focus();
  }, [error]);
  const cron = explainCron(d.cron_expr);
  const set = <K extends keyof Draft>(k: K, v: Draft[K]) => setD((cur) => ({ ...cur, [k]: v }));

  // Saved, the form stays until the list is fetched again: a second
  // Enter meanwhile is not a second schedule.
  const saving = useRef(false);
  async function save(e: FormEvent) {
    e.preventDefault();
    if (saving.current) return;
    saving.current = true;
    setError(null);
    try {
      if (id === undefined) unwrap(await api.client.POST("/api/v1/schedules", { body: toBody(d) }));
      else unwrap(await api.client.PUT("/api/v1/schedules/{id}", { params: { path: { id } }, body: toBody(d) }));
      await onDone();
    } catch (err) {
      setError(err instanceof ApiError ? { message: err.message, field: err.field } : { message: String(err) });
    } finally {
      saving.current = false;
    }
  }

  async function remove() {
    if (id === undefined) return;
    try {
      unwrap(await api.client.DELETE("/api/v1/schedules/{id}", { params: { path: { id } } }));
      await onDone();
    } catch (err) {
      setError({ message: err instanceof Error ? err.message : String(err) });
    }
  }

  const fieldError = (f: string) =>
    error?.field === f ? (
      <Alert id={`err-${f}`} className="mt-1">
        {/* Under its field, an error needs no "cron_expr: " (the API's name of the field) before it. */}
        {error.message.startsWith(`${f}: `) ? error.message.slice(f.length + 2) : error.message}
      </Alert>
    ) : null;
  const text = (k: "name" | "cron_expr" | "title", label: string, testid: string, extra?: React.ReactNode) => (
    <InputField
      id={testid}
      label={label}
      value={d[k]}
      aria-invalid={error?.field === k}
      aria-describedby={error?.field === k ? `err-${k}` : undefined}
      onChange={(v) => set(k, v)}
      after={
        <>
          {fieldError(k)}
          {extra}
        </>
      }
    />
  );

  return (
    <form onSubmit={save} className="card space-y-3" aria-label={id === undefined ? "New schedule" : `Edit schedule ${initial.name}`}>
      <div className="grid gap-3 sm:grid-cols-2">
        {text("name", "Name", "schedule-name")}
        {text(
          "cron_expr",
          "Cron expression",
          "schedule-cron",
          <div className="mt-1 text-xs">
            <p data-testid="cron-explained" aria-live="polite">
              {cron.error ? <span className="text-red-700 dark:text-red-400">{cron.error}</span> : cron.words}
            </p>
            <ol data-testid="cron-next-runs" aria-label="Next five runs" className="mt-1 list-decimal pl-5">
              {cron.next.map((t) => (
                <li key={t.getTime()}>{t.toLocaleString()}</li>
              ))}
            </ol>
          </div>,
        )}
      </div>
      {text("title", "Task title", "schedule-title")}
      <TextAreaField id="schedule-body" label="Task description" className="min-h-20" value={d.body} onChange={(v) => set("body", v)} after={fieldError("body")} />
      <div className="grid gap-3 sm:grid-cols-2">
        <SelectField id="schedule-piece" label="Piece" value={d.piece} options={pieceOptions} onChange={(v) => set("piece", v)} after={fieldError("piece")} />
        <div className="pt-6">
          <CheckboxField id="schedule-enabled" label="Enabled" checked={d.enabled} onChange={(v) => set("enabled", v)} />
        </div>
      </div>
      {error && !["name", "cron_expr", "title", "body", "piece"].includes(error.field ?? "") && <Alert>{error.message}</Alert>}
      <div className="flex flex-wrap gap-2">
        <button type="submit" className="btn btn-primary" data-testid="schedule-save">
          Save
        </button>
        <button type="button" className="btn" onClick={onCancel}>
          Close
        </button>
        {id !== undefined &&
          (confirmDelete ? (
            <button type="button" className="btn btn-danger" data-testid="schedule-delete" onClick={() => void remove()}>
              Really delete
            </button>
          ) : (
            <button type="button" className="btn" data-testid="schedule-delete" onClick={() => setConfirmDelete(true)}>
              Delete
            </button>
          ))}
      </div>
    </form>
  );
}
