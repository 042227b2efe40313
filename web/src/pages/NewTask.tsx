import { useEffect, useRef, useState, type FormEvent, type KeyboardEvent } from "react";
import { useNavigate, useSearchParams } from "react-router";
import { useQueryClient } from "@tanstack/react-query";
import { useApi } from "../api/context";
import { usePieceOptions, useServerInfo } from "../lib/queries";
import { ApiError, unwrap } from "../api/client";
import { getToken } from "../api/auth";
import type { ApiErrorBody, Task } from "../api/types";
import { createTaskWithFiles } from "../lib/upload";
import { formatBytes } from "../lib/format";
import { Alert, InputField, SelectField, TextAreaField } from "../components/Field";

type Executor = "native" | "agent-cli" | "replay";

const executors: { value: Executor; label: string }[] = [
  { value: "native", label: "native model" },
  { value: "agent-cli", label: "agent CLI" },
  { value: "replay", label: "replay" },
];

const executorHelp: Record<Executor, string> = {
  native: "Maestro's own loop on the server's configured model (refused when it has none).",
  "agent-cli": "Every movement of the piece runs on the agent CLI you pick.",
  replay: "A scripted scenario (YAML or JSON, docs/replay.md); empty plays the bundled demo, even when the server has a model.",
};

interface FormError {
  message: string;
  field?: string;
}

// NewTask creates a task: JSON when it has no files, else one multipart
// request with per-file progress. ⌘/Ctrl-Enter submits from any field.
export default function NewTask() {
  const api = useApi();
  const qc = useQueryClient();
  const navigate = useNavigate();
  const [title, setTitle] = useState("");
  const [body, setBody] = useState("");
  // ?piece= preselects a piece (the pieces studio's "Run this piece").
  const [params] = useSearchParams();
  const [piece, setPiece] = useState(params.get("piece") ?? "");
  // "" follows the server's default (executor_default) and sends nothing.
  const [picked, setPicked] = useState<Executor | "">("");
  const [agent, setAgent] = useState("");
  const [scenario, setScenario] = useState("");
  const [files, setFiles] = useState<File[]>([]);
  const [progress, setProgress] = useState<number[]>([]);
  const [error, setError] = useState<FormError | null>(null);
  const [busy, setBusy] = useState(false);
  const [dragging, setDragging] = useState(false);
  const formRef = useRef<HTMLFormElement>(null);
  // A refused task: the field at fault takes the focus (the error is under
  // a field the keyboard may be far from). An error of no field leaves it
  // on Submit, which keeps it while sending: it is aria-disabled, not
  // disabled (that dropped the focus on <body>), and submit does nothing
  // while busy.
  const submitRef = useRef<HTMLButtonElement>(null);
  useEffect(() => {
    if (!error || busy) return;
    const f = error.field ?? "";
    const id = f.startsWith("payload") ? "new-task-scenario" : f === "path" || f === "file" ? "new-task-files" : `new-task-${f}`;
    const el = (f && document.getElementById(id)) || submitRef.current;
    el?.focus();
  }, [error, busy]);
  // A file removed: the next file's Remove (or the previous one's, or the
  // picker) takes the focus its button held.
  const removed = useRef<number | null>(null);
  useEffect(() => {
    const i = removed.current;
    if (i === null) return;
    removed.current = null;
    const buttons = [...(formRef.current?.querySelectorAll<HTMLButtonElement>('[data-testid="remove-file"]') ?? [])];
    (buttons[i] ?? buttons[i - 1] ?? document.getElementById("new-task-files"))?.focus();
  }, [files]);

  const pieceOptions = usePieceOptions();
  const server = useServerInfo();
  const executor: Executor = picked || (server.data?.executor_default === "replay" ? "replay" : "native");
  const agents = server.data?.agents ?? [];
  const agentOptions = [{ value: "", label: agents.length ? "choose…" : "none installed" }, ...agents.map((a) => ({ value: a, label: a }))];

  function addFiles(list: FileList | null) {
    if (!list) return;
    const added = Array.from(list);
    setFiles((cur) => [...cur.filter((f) => !added.some((a) => a.name === f.name)), ...added]);
    setProgress([]);
  }

  async function submit(e?: FormEvent) {
    e?.preventDefault();
    if (busy) return;
    setError(null);
    if (!title.trim()) {
      setError({ message: "Required: a short description of the work.", field: "title" });
      return;
    }
    const task: Record<string, unknown> = { title: title.trim() };
    if (body) task.body = body;
    if (piece) task.piece = piece;
    if (picked) task.executor = picked;
    if (picked === "agent-cli") task.agent = agent;
    if (executor === "replay" && scenario.trim()) task.payload = { replay: scenario };
    setBusy(true);
    try {
      let created: Task;
      if (files.length > 0) {
        setProgress(files.map(() => 0));
        const res = await createTaskWithFiles(
          `${api.opts.baseUrl ?? ""}/api/v1/tasks`,
          task,
          files,
          setProgress,
          getToken(),
        );
        if (res.status === 401) api.opts.onUnauthorized();
        if (res.status < 200 || res.status >= 300) {
          throw new ApiError(res.status, res.body as ApiErrorBody, `${res.status}`);
        }
        created = (res.body as { task: Task }).task;
      } else {
        created = unwrap(
          await api.client.POST("/api/v1/tasks", { body: task as { title: string } }),
        ).task;
      }
      await qc.invalidateQueries({ queryKey: ["tasks"] });
      navigate(`/tasks/${created.id}`);
    } catch (err) {
      if (err instanceof ApiError) setError({ message: err.message, field: err.field });
      else setError({ message: err instanceof Error ? err.message : String(err) });
    } finally {
      setBusy(false);
    }
  }

  function onKeyDown(e: KeyboardEvent) {
    if (e.key === "Enter" && (e.metaKey || e.ctrlKey)) {
      e.preventDefault();
      void submit();
    }
  }

  // A field's error is shown under it; payload.replay and the payload's
  // other fields under the scenario box, the payload's only input.
  const fieldError = (name: string) =>
    error && (error.field === name || (name === "payload" && error.field?.startsWith("payload."))) ? (
      <Alert id={`err-${name}`} className="mt-1">
        {/* Under its field, an error needs no "title: " (the API's name of the field) before it. */}
        {error.field && error.message.startsWith(`${error.field}: `) ? error.message.slice(error.field.length + 2) : error.message}
      </Alert>
    ) : null;

  return (
    <form ref={formRef} onSubmit={submit} onKeyDown={onKeyDown} className="card max-w-3xl space-y-4" aria-labelledby="new-h">
      <h1 id="new-h" className="text-xl font-semibold">
        New task
      </h1>
      <InputField
        id="new-task-title"
        label="Title"
        value={title}
        onChange={setTitle}
        maxLength={1024}
        aria-invalid={error?.field === "title"}
        aria-describedby={error?.field === "title" ? "err-title" : undefined}
        after={fieldError("title")}
      />
      <TextAreaField id="new-task-body" label="Description (markdown)" className="min-h-40 font-mono" value={body} onChange={setBody} after={fieldError("body")} />
      <div className="grid gap-4 sm:grid-cols-2">
        <SelectField id="new-task-piece" label="Piece" value={piece} options={pieceOptions} onChange={setPiece} after={fieldError("piece")} />
        <SelectField
          id="new-task-executor"
          label="Executor"
          value={executor}
          options={executors}
          onChange={(v) => setPicked(v as Executor)}
          describedBy="executor-help"
          after={
            <>
              <p id="executor-help" className="mt-1 text-xs text-slate-600 dark:text-slate-400">
                {executorHelp[executor]}
              </p>
              {fieldError("executor")}
            </>
          }
        />
      </div>
      {executor === "agent-cli" && (
        <SelectField id="new-task-agent" label="Agent CLI" value={agent} options={agentOptions} onChange={setAgent} after={fieldError("agent")} />
      )}
      {executor === "replay" && (
        <TextAreaField id="new-task-scenario" label="Replay scenario" className="min-h-24 font-mono" value={scenario} onChange={setScenario} after={fieldError("payload")} />
      )}
      <div>
        <label
          htmlFor="new-task-files"
          data-testid="new-task-dropzone"
          onDragOver={(e) => {
            e.preventDefault();
            setDragging(true);
          }}
          onDragLeave={() => setDragging(false)}
          onDrop={(e) => {
            e.preventDefault();
            setDragging(false);
            addFiles(e.dataTransfer.files);
          }}
          className={`block cursor-pointer rounded-lg border-2 border-dashed p-4 text-center text-sm ${
            dragging ? "border-sky-600 bg-sky-50 dark:bg-sky-950" : "border-slate-300 dark:border-slate-600"
          }`}
        >
          Files: drop them here or choose…
        </label>
        <input
          id="new-task-files"
          data-testid="new-task-files"
          type="file"
          multiple
          className="mt-2 block text-sm"
          onChange={(e) => addFiles(e.target.files)}
        />
        {files.length > 0 && (
          <ul className="mt-2 space-y-1" aria-label="Files to upload">
            {files.map((f, i) => (
              <li key={f.name} className="flex flex-wrap items-center gap-2 text-sm">
                {/* The whole name, wrapped: cut short, files named alike but for their end looked the same. */}
                <span className="min-w-0 flex-1 basis-full wrap-anywhere sm:basis-0">{f.name}</span>
                <span className="text-xs text-slate-600 dark:text-slate-400">{formatBytes(f.size)}</span>
                <progress
                  data-testid="upload-progress"
                  data-name={f.name}
                  max={1}
                  value={progress[i] ?? 0}
                  aria-label={`Upload of ${f.name}`}
                  className="w-24"
                />
                <button
                  type="button"
                  className="btn px-2 py-0.5"
                  data-testid="remove-file"
                  aria-label={`Remove ${f.name}`}
                  // Busy, it is aria-disabled, not disabled: Ctrl+Enter
                  // sends the form from here, and a disabled button
                  // dropped the focus on <body> until the upload ended.
                  aria-disabled={busy || undefined}
                  onClick={() => {
                    if (busy) return;
                    removed.current = i;
                    setFiles((cur) => cur.filter((x) => x !== f));
                    setProgress([]);
                  }}
                >
                  ✕
                </button>
              </li>
            ))}
          </ul>
        )}
        {fieldError("path")}
        {fieldError("file")}
      </div>
      {error &&
        !["title", "body", "piece", "executor", "agent", "payload", "path", "file"].includes(error.field ?? "") &&
        !error.field?.startsWith("payload.") && <Alert>{error.message}</Alert>}
      <div className="flex items-center gap-3">
        <button type="submit" ref={submitRef} className="btn btn-primary" data-testid="new-task-submit" aria-disabled={busy || undefined}>
          {busy ? "Submitting…" : "Submit"}
        </button>
        <span className="text-xs text-slate-600 dark:text-slate-400">⌘/Ctrl-Enter</span>
      </div>
    </form>
  );
}
