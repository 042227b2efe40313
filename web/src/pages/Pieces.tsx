import { lazy, Suspense, useEffect, useMemo, useRef, useState } from "react";
import { Link, Route, Routes, useNavigate, useParams, useSearchParams } from "react-router";
import { useQuery, useQueryClient } from "@tanstack/react-query";
import { useApi } from "../api/context";
import { ApiError, unwrap } from "../api/client";
import type { components } from "../api/schema";
import type { ApiErrorBody, PieceSummary } from "../api/types";
import { ConfirmDialog } from "../components/ConfirmDialog";
import { Section } from "../components/Field";
import { PieceGraph } from "../components/PieceGraph";
import type { Fault } from "../components/YamlEditor";
import { lineDiff, type Movement, type ParsedPiece } from "../lib/piecegraph";

// CodeMirror is its own chunk, loaded with the editor.
const YamlEditor = lazy(() => import("../components/YamlEditor"));

type PieceDetail = components["schemas"]["PieceDetail"];

// The pieces studio: the catalog, and one piece's graph, movements, YAML
// editor (validated as you type), diff, save, delete and run.
export default function Pieces() {
  return (
    <Routes>
      <Route index element={<Catalog />} />
      <Route path="new" element={<NewStudio />} />
      <Route path=":name" element={<NamedStudio />} />
    </Routes>
  );
}

// The studio keeps no state from one piece (or template) to the next:
// "New from this" and saving a new piece change the route, not the page.
function NewStudio() {
  const [search] = useSearchParams();
  return <Studio key={`new:${search.get("from") ?? ""}`} />;
}

function NamedStudio() {
  const { name } = useParams();
  return <Studio key={`piece:${name ?? ""}`} />;
}

const sourceLabel = (p: PieceSummary) => (p.source === "store" ? (p.builtin ? "stored (overrides built-in)" : "stored") : p.source === "file" ? "file" : "built-in");

function Catalog() {
  const api = useApi();
  const list = useQuery({
    queryKey: ["pieces"],
    queryFn: async () => unwrap(await api.client.GET("/api/v1/pieces")).pieces,
  });
  return (
    <section aria-labelledby="pieces-h" className="space-y-4">
      <h1 id="pieces-h" className="text-xl font-semibold">
        Pieces
      </h1>
      {list.error && (
        <p className="error" role="alert">
          {list.error.message}
        </p>
      )}
      <div className="card overflow-x-auto">
        <table className="w-full text-left text-sm" data-testid="piece-catalog">
          <thead>
            <tr>
              <th scope="col" className="py-1 pr-3">Name</th>
              <th scope="col" className="py-1 pr-3">Source</th>
              <th scope="col" className="py-1 pr-3">Version</th>
              <th scope="col" className="py-1 pr-3">Movements</th>
              <th scope="col" className="py-1">Missing tools</th>
            </tr>
          </thead>
          <tbody>
            {(list.data ?? []).map((p) => (
              <tr key={p.name} className="border-t border-slate-200 align-top dark:border-slate-700" data-testid="piece-row" data-name={p.name}>
                <th scope="row" className="py-1 pr-3 font-normal wrap-anywhere">
                  <Link to={`/pieces/${encodeURIComponent(p.name)}`} className="font-medium text-sky-800 hover:underline dark:text-sky-300">
                    {p.name}
                  </Link>
                  {p.description && <div className="text-xs text-slate-600 dark:text-slate-400">{p.description.split("\n")[0]}</div>}
                  {p.error && <div className="error text-xs">{p.error}</div>}
                </th>
                <td className="py-1 pr-3">{sourceLabel(p)}{p.file ? <div className="text-xs break-all">{p.file}</div> : null}</td>
                <td className="py-1 pr-3">{p.version ?? "—"}</td>
                <td className="py-1 pr-3">{(p.movements ?? []).join(" → ")}</td>
                <td className="py-1" data-testid="piece-missing">{p.missing_tools?.length ? p.missing_tools.join(", ") : "—"}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </section>
  );
}

// renamed sets the YAML's top-level name: (a template copied under a new name).
function renamed(src: string, name: string): string {
  return /^name:.*$/m.test(src) ? src.replace(/^name:.*$/m, `name: ${name}`) : `name: ${name}\n${src}`;
}

function faultsOf(err: unknown): Fault[] {
  if (err instanceof ApiError) {
    const list = err.body?.errors;
    if (list?.length) return list;
    return [{ line: 1, col: 1, message: err.message }];
  }
  return [];
}

function Studio() {
  const api = useApi();
  const qc = useQueryClient();
  const navigate = useNavigate();
  const params = useParams();
  const [search] = useSearchParams();
  const creating = params.name === undefined;
  const template = search.get("from") ?? "general";
  const name = params.name ?? "";
  const detail = useQuery({
    queryKey: ["piece", creating ? template : name],
    queryFn: async () => unwrap(await api.client.GET("/api/v1/pieces/{name}", { params: { path: { name: creating ? template : name } } })),
  });
  const [newName, setNewName] = useState("");
  const [text, setText] = useState<string | undefined>(undefined);
  const [saved, setSaved] = useState<PieceDetail | undefined>(undefined);
  const [previous, setPrevious] = useState<string | undefined>(undefined);
  const [faults, setFaults] = useState<Fault[]>([]);
  const [parsed, setParsed] = useState<ParsedPiece | undefined>(undefined);
  const [selected, setSelected] = useState<string | undefined>(undefined);
  const [conflict, setConflict] = useState<PieceDetail | undefined>(undefined);
  const [message, setMessage] = useState<string>("");
  const [error, setError] = useState<string>("");
  const [confirmDelete, setConfirmDelete] = useState(false);
  const [showDiff, setShowDiff] = useState(false);
  // The stored version the diff compares the editor with (undefined: the
  // one before the saved version).
  const [baseVersion, setBaseVersion] = useState<number | undefined>(undefined);
  // Save (disabled once saved), Discard changes and the conflict's buttons
  // (gone once used) left the focus on <body>, the next Tab at the top of
  // the window: the editor, where the work goes on, takes it back.
  const focusEditor = useRef<(() => void) | null>(null);
  const saveButton = useRef<HTMLButtonElement>(null);
  const conflictBox = useRef<HTMLElement>(null);
  const backToEditor = () => {
    const a = document.activeElement;
    if (!a || a === document.body || !a.isConnected || a === saveButton.current || conflictBox.current?.contains(a)) focusEditor.current?.();
  };

  // Load the piece (or the template) into the editor once.
  useEffect(() => {
    const d = detail.data;
    if (!d || text !== undefined) return;
    setSaved(creating ? undefined : d);
    setText(creating ? renamed(d.yaml, newName || `${template}-copy`) : d.yaml);
    setParsed(d.piece as unknown as ParsedPiece | undefined);
    if (creating && !newName) setNewName(`${template}-copy`);
  }, [detail.data, text, creating, newName, template]);

  // Validate as you type (debounced POST /api/v1/pieces/validate).
  useEffect(() => {
    if (text === undefined) return;
    const ctl = new AbortController();
    const t = setTimeout(async () => {
      const r = await api.client.POST("/api/v1/pieces/validate", { body: { yaml: text }, signal: ctl.signal }).catch(() => undefined);
      if (!r || ctl.signal.aborted) return;
      if (r.response.ok && r.data) {
        setFaults([]);
        setParsed(r.data.piece as unknown as ParsedPiece);
      } else {
        const body = r.error as ApiErrorBody | undefined;
        setFaults(body?.errors?.length ? body.errors : [{ line: 1, col: 1, message: body?.error ?? `${r.response.status}` }]);
      }
    }, 350);
    return () => {
      clearTimeout(t);
      ctl.abort();
    };
  }, [text, api]);

  const movement: Movement | undefined = parsed?.movements.find((m) => m.name === selected);
  const dirty = text !== undefined && text !== (saved?.yaml ?? "");
  // A stored piece's history (GET …/versions): the diff picks any version,
  // by default the one before the saved version.
  const stored = !creating && saved?.source === "store" && saved.version !== undefined;
  const versions = useQuery({
    queryKey: ["piece-versions", name, saved?.version],
    enabled: showDiff && stored,
    queryFn: async () => unwrap(await api.client.GET("/api/v1/pieces/{name}/versions", { params: { path: { name } } })).versions,
  });
  const earlier = (versions.data ?? []).find((v) => saved?.version !== undefined && v.version < saved.version)?.version;
  const chosen = stored ? (baseVersion ?? earlier ?? saved?.version) : undefined;
  const baseYaml = useQuery({
    queryKey: ["piece-version", name, chosen],
    enabled: showDiff && chosen !== undefined && chosen !== saved?.version,
    queryFn: async () => unwrap(await api.client.GET("/api/v1/pieces/{name}/versions/{version}", { params: { path: { name, version: chosen ?? 0 } } })).yaml ?? "",
  });
  let diffBase: string | undefined = saved?.yaml ?? detail.data?.yaml ?? "";
  if (chosen !== undefined && chosen !== saved?.version) diffBase = baseYaml.data; // an earlier version (undefined while it loads)
  else if (earlier === undefined && baseVersion === undefined && previous !== undefined) diffBase = previous; // no earlier stored version: what this page saved over
  const diff = useMemo(() => (showDiff && text !== undefined && diffBase !== undefined ? lineDiff(diffBase, text) : []), [showDiff, diffBase, text]);

  const save = async (ifVersion?: number) => {
    if (text === undefined) return;
    setError("");
    setMessage("");
    try {
      let d: PieceDetail;
      if (creating) {
        d = unwrap(await api.client.POST("/api/v1/pieces", { body: { yaml: renamed(text, newName) } }));
      } else {
        d = unwrap(
          await api.client.PUT("/api/v1/pieces/{name}", {
            params: { path: { name } },
            body: { yaml: text, ...(ifVersion ? { if_version: ifVersion } : {}) },
          }),
        );
      }
      setPrevious(saved?.yaml);
      setBaseVersion(undefined);
      setSaved(d);
      setConflict(undefined);
      setFaults([]);
      setParsed(d.piece as unknown as ParsedPiece | undefined);
      setMessage(`Saved version ${d.version}.`);
      if (!creating) backToEditor();
      qc.invalidateQueries({ queryKey: ["pieces"] });
      qc.setQueryData(["piece", d.name], d);
      if (creating) navigate(`/pieces/${encodeURIComponent(d.name)}`);
    } catch (e) {
      if (e instanceof ApiError && e.status === 409 && e.field === "if_version") {
        const theirs = unwrap(await api.client.GET("/api/v1/pieces/{name}", { params: { path: { name } } }));
        setConflict(theirs);
        return;
      }
      if (e instanceof ApiError && e.status === 422) setFaults(faultsOf(e));
      setError(e instanceof Error ? e.message : String(e));
    }
  };

  const remove = async () => {
    setConfirmDelete(false);
    try {
      const r = unwrap(await api.client.DELETE("/api/v1/pieces/{name}", { params: { path: { name }, query: { version: saved?.version } } }));
      qc.invalidateQueries({ queryKey: ["pieces"] });
      qc.removeQueries({ queryKey: ["piece", name] });
      navigate("/pieces", { state: { deleted: r.deleted } });
    } catch (e) {
      setError(e instanceof Error ? e.message : String(e));
    }
  };

  const title = creating ? `New piece from ${template}` : name;
  // The piece (or the template) could not be loaded and nothing is in the
  // editor: the error alone, and the way back (no graph waiting forever, no
  // Save, Run or New from this for a piece the server does not have).
  const missing = detail.isError && text === undefined;
  return (
    <section aria-labelledby="piece-h" className="space-y-4">
      <div className="flex flex-wrap items-center gap-2">
        <h1 id="piece-h" className="mr-auto min-w-0 text-xl font-semibold wrap-anywhere">
          <Link to="/pieces" className="text-sky-800 underline dark:text-sky-300">
            Pieces
          </Link>{" "}
          / {title}
        </h1>
        {/* The actions show together once the piece is loaded: Delete
            appearing later beside them moved Run and New from this under
            the pointer, and a click meant for New from this hit Delete. */}
        {!creating && !missing && saved !== undefined && (
          <>
            <Link className="btn" data-testid="piece-run" to={`/tasks/new?piece=${encodeURIComponent(name)}`}>
              Run this piece
            </Link>
            <Link className="btn" data-testid="piece-template" to={`/pieces/new?from=${encodeURIComponent(name)}`}>
              New from this
            </Link>
            {saved?.deletable && (
              <button type="button" className="btn btn-danger" data-testid="piece-delete" onClick={() => setConfirmDelete(true)}>
                Delete
              </button>
            )}
          </>
        )}
      </div>
      {detail.error && (
        <p className="error" role="alert">
          {detail.error.message}
        </p>
      )}
      {missing && (
        <p className="text-sm">
          <Link to="/pieces" data-testid="piece-missing-back" className="text-sky-800 underline dark:text-sky-300">
            Back to the catalog
          </Link>
        </p>
      )}
      {saved && (
        <p className="text-sm wrap-anywhere" data-testid="piece-meta">
          {sourceLabel(saved)}
          {saved.version ? ` · version ${saved.version}` : ""}
          {saved.file ? ` · ${saved.file}` : ""}
          {saved.source !== "store" ? " · saving stores an override" : ""}
        </p>
      )}
      {!missing && (
        <div className="grid grid-cols-1 gap-4 lg:grid-cols-2">
          <Section id="piece-graph-h" title="Movements and transitions">
            {parsed ? <PieceGraph piece={parsed} selected={selected} onSelect={setSelected} /> : <p className="text-sm">Loading…</p>}
            <p className="mt-1 text-xs text-slate-600 dark:text-slate-400">Solid: rules' next · dashed: default_next · light: the complete tool (COMPLETE, ABORT, ASK). Click a movement.</p>
            {movement && <MovementPanel m={movement} />}
          </Section>
          <Section id="piece-yaml-h" title="YAML">
            {creating && (
              <div className="mb-2">
                <label htmlFor="piece-name" className="label">
                  Name of the new piece
                </label>
                <input id="piece-name" data-testid="piece-name" className="input" value={newName} onChange={(e) => setNewName(e.target.value)} />
              </div>
            )}
            {text !== undefined && (
              <Suspense fallback={<p className="text-sm">Loading the editor…</p>}>
                <YamlEditor value={text} onChange={setText} faults={faults} label={`YAML of piece ${title}`} focusRef={focusEditor} />
              </Suspense>
            )}
            <div aria-live="polite" className="mt-2 text-sm">
              {faults.length > 0 ? (
                <ul className="error space-y-0.5" data-testid="piece-errors">
                  {faults.map((f, i) => (
                    <li key={i} data-line={f.line}>
                      {f.line}:{f.col}: {f.message}
                    </li>
                  ))}
                </ul>
              ) : (
                text !== undefined && <p data-testid="piece-valid">Valid.</p>
              )}
            </div>
            <div className="mt-2 flex flex-wrap gap-2">
              <button type="button" ref={saveButton} className="btn btn-primary" data-testid="piece-save" disabled={!dirty && !creating} onClick={() => save(saved?.source === "store" ? saved.version : undefined)}>
                {creating ? "Create" : "Save"}
              </button>
              <button type="button" className="btn" data-testid="piece-diff-toggle" aria-expanded={showDiff} onClick={() => setShowDiff((v) => !v)}>
                {showDiff ? "Hide diff" : stored || previous !== undefined ? "Diff against an earlier version" : "Diff against the saved version"}
              </button>
              {dirty && saved && (
                <button
                  type="button"
                  className="btn"
                  data-testid="piece-discard"
                  onClick={() => {
                    setText(saved.yaml);
                    focusEditor.current?.();
                  }}
                >
                  Discard changes
                </button>
              )}
            </div>
            {message && (
              <p className="mt-2 text-sm" role="status" data-testid="piece-saved">
                {message}
              </p>
            )}
            {error && (
              <p className="error mt-2 text-sm" role="alert" data-testid="piece-error">
                {error}
              </p>
            )}
            {showDiff && stored && (versions.data?.length ?? 0) > 0 && (
              <div className="mt-2">
                <label htmlFor="piece-diff-base" className="label">
                  Compare the editor with
                </label>
                <select id="piece-diff-base" data-testid="piece-diff-base" className="input" value={chosen ?? ""} onChange={(e) => setBaseVersion(Number(e.target.value))}>
                  {(versions.data ?? []).map((v) => (
                    <option key={v.version} value={v.version}>
                      version {v.version}
                      {v.version === saved?.version ? " (saved)" : ""} · {new Date(v.created_at).toLocaleString()}
                    </option>
                  ))}
                </select>
              </div>
            )}
            {showDiff && versions.error && (
              <p className="error mt-2 text-sm" role="alert">
                {versions.error.message}
              </p>
            )}
            {showDiff && (diffBase === undefined ? <p className="mt-2 text-sm">Loading the version…</p> : <Diff lines={diff} base={chosen} />)}
          </Section>
        </div>
      )}
      {conflict && text !== undefined && (
        <section ref={conflictBox} aria-labelledby="conflict-h" className="card border-amber-500" data-testid="piece-conflict">
          <h2 id="conflict-h" className="mb-1 font-semibold">
            Someone else saved this piece (now version {conflict.version})
          </h2>
          <p className="mb-2 text-sm">Your edit was made on version {saved?.version}. Their version against yours:</p>
          <Diff lines={lineDiff(conflict.yaml, text)} />
          <div className="mt-2 flex flex-wrap gap-2">
            <button
              type="button"
              className="btn"
              data-testid="conflict-take-theirs"
              onClick={() => {
                setSaved(conflict);
                setText(conflict.yaml);
                setConflict(undefined);
                focusEditor.current?.();
              }}
            >
              Load theirs (drop my changes)
            </button>
            <button type="button" className="btn btn-danger" data-testid="conflict-overwrite" onClick={() => save(conflict.version)}>
              Overwrite with mine
            </button>
          </div>
        </section>
      )}
      <ConfirmDialog
        open={confirmDelete}
        title={`Delete piece ${name}?`}
        message={saved?.builtin ? "The built-in piece of this name is used again." : "The piece is removed; tasks that name it will fail."}
        confirmLabel="Delete"
        onConfirm={remove}
        onCancel={() => setConfirmDelete(false)}
      />
    </section>
  );
}

function MovementPanel({ m }: { m: Movement }) {
  return (
    <dl className="mt-3 grid grid-cols-[auto_minmax(0,1fr)] gap-x-3 gap-y-1 border-t border-slate-200 pt-2 text-sm wrap-anywhere dark:border-slate-700" data-testid="movement-panel">
      <dt className="font-semibold">Movement</dt>
      <dd data-testid="movement-name">{m.name}</dd>
      <dt className="font-semibold">Persona</dt>
      <dd className="whitespace-pre-wrap">{m.persona || "—"}</dd>
      <dt className="font-semibold">Instruction</dt>
      {/* A long instruction scrolls: keyboard users can reach it. */}
      <dd className="max-h-40 overflow-auto whitespace-pre-wrap" tabIndex={0} aria-label={`Instruction of ${m.name}`}>
        {m.instruction || "—"}
      </dd>
      <dt className="font-semibold">Tools</dt>
      <dd data-testid="movement-tools">{m.allowed_tools?.length ? m.allowed_tools.join(", ") : "none"}</dd>
      <dt className="font-semibold">Edits files</dt>
      <dd data-testid="movement-edit">{m.edit ? "yes" : "no"}</dd>
      {m.agent && (
        <>
          <dt className="font-semibold">Agent CLI</dt>
          <dd>{m.agent}</dd>
        </>
      )}
      {m.model && (
        <>
          <dt className="font-semibold">Model</dt>
          <dd>{m.model}</dd>
        </>
      )}
    </dl>
  );
}

function Diff({ lines, base }: { lines: { op: " " | "-" | "+"; text: string }[]; base?: number }) {
  if (!lines.some((l) => l.op !== " "))
    return (
      <p className="mt-2 text-sm" data-testid="piece-diff" data-base={base}>
        No differences.
      </p>
    );
  return (
    <pre tabIndex={0} aria-label="Diff" className="mt-2 max-h-80 overflow-auto rounded bg-slate-50 p-2 text-xs dark:bg-slate-900" data-testid="piece-diff" data-base={base}>
      {lines.map((l, i) => (
        <div key={i} className={l.op === "-" ? "bg-red-100 text-red-900 dark:bg-red-950 dark:text-red-200" : l.op === "+" ? "bg-emerald-100 text-emerald-900 dark:bg-emerald-950 dark:text-emerald-200" : ""}>
          {l.op} {l.text}
        </div>
      ))}
    </pre>
  );
}
