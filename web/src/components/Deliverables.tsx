import { useEffect, useState } from "react";
import { useQuery } from "@tanstack/react-query";
import { useApi } from "../api/context";
import { rawJSON, unwrap } from "../api/client";
import { getToken } from "../api/auth";
import { formatBytes } from "../lib/format";
import { parseCSV } from "../lib/csv";
import { Markdown } from "./Markdown";
import { Alert } from "./Field";

const previewLimit = 1 << 20; // bytes fetched for a text preview

export function deliverableURL(taskId: number, path: string): string {
  return `/api/v1/tasks/${taskId}/deliverables/${path.split("/").map(encodeURIComponent).join("/")}`;
}

export type PreviewKind = "markdown" | "csv" | "image" | "text" | "none";

export function previewKind(path: string): PreviewKind {
  const ext = path.toLowerCase().split(".").pop() ?? "";
  if (["md", "markdown"].includes(ext)) return "markdown";
  if (["csv"].includes(ext)) return "csv";
  if (["png", "jpg", "jpeg", "gif", "webp", "svg", "avif", "bmp"].includes(ext)) return "image";
  if (
    [
      "txt", "log", "json", "yaml", "yml", "toml", "go", "py", "js", "ts", "tsx", "jsx", "sh", "html", "css",
      "xml", "ini", "cfg", "conf", "rs", "java", "c", "h", "cpp", "rb", "sql", "tsv", "diff", "patch",
    ].includes(ext) ||
    !path.includes(".")
  )
    return "text";
  return "none";
}

// Deliverables lists the task's output/ files with download links and an
// inline preview (text, markdown, images, CSV as a table).
export function Deliverables({ taskId, refreshKey }: { taskId: number; refreshKey: string }) {
  const api = useApi();
  const [preview, setPreview] = useState<string | null>(null);
  const list = useQuery({
    queryKey: ["deliverables", taskId, refreshKey],
    queryFn: async () =>
      unwrap(await api.client.GET("/api/v1/tasks/{id}/deliverables", { params: { path: { id: taskId } } })),
    refetchInterval: 10_000, // files appear while the job runs
    // A new refreshKey (the job ended) keeps this task's list shown while
    // the new one loads: it flashed "Loading deliverables…". Another
    // task's list is never kept.
    placeholderData: (prev, prevQuery) => (prevQuery?.queryKey[1] === taskId ? prev : undefined),
  });

  // With a token the browser cannot send it on a plain link: fetch the file
  // and hand it over as a blob.
  // A download refused or unanswered says why: it did nothing at all.
  const [downloadError, setDownloadError] = useState<string | null>(null);
  async function download(path: string) {
    setDownloadError(null);
    let url: string;
    try {
      const res = await api.raw(deliverableURL(taskId, path));
      if (!res.ok) await rawJSON(res);
      url = URL.createObjectURL(await res.blob());
    } catch (err) {
      setDownloadError(`${path} could not be downloaded: ${err instanceof Error ? err.message : String(err)}`);
      return;
    }
    const a = document.createElement("a");
    a.href = url;
    a.download = path.split("/").pop() ?? "file";
    a.click();
    setTimeout(() => URL.revokeObjectURL(url), 10_000);
  }

  if (list.isPending) return <p className="text-sm">Loading deliverables…</p>;
  // A list shown stays when a later fetch fails (the server stopped): its
  // files are still there, and the error shows above them.
  if (list.error && !list.data) return <p className="error">{list.error.message}</p>;
  const files = list.data.files;
  return (
    <div className="space-y-2">
      {list.error && <p className="error">{list.error.message}</p>}
      {downloadError && <Alert testId="deliverable-error">{downloadError}</Alert>}
      {files.length === 0 && <p className="text-sm text-slate-600 dark:text-slate-400">No deliverables yet.</p>}
      <ul className="divide-y divide-slate-200 dark:divide-slate-800">
        {files.map((f) => (
          <li key={f.path} data-testid="deliverable-row" data-path={f.path} data-size={f.size} className="flex flex-wrap items-center gap-2 py-1.5">
            {/* The whole path, wrapped: cut short, files of one deep directory looked alike. */}
            <span className="min-w-0 flex-1 basis-full font-mono text-sm wrap-anywhere sm:basis-0">{f.path}</span>
            <span className="text-xs text-slate-600 dark:text-slate-400">{formatBytes(f.size)}</span>
            <a
              className="btn px-2 py-0.5"
              data-testid="deliverable-download"
              href={deliverableURL(taskId, f.path)}
              download
              aria-label={`Download ${f.path}`}
              onClick={(e) => {
                if (getToken()) {
                  e.preventDefault();
                  void download(f.path);
                }
              }}
            >
              Download
            </a>
            {previewKind(f.path) !== "none" && (
              <button
                type="button"
                className="btn px-2 py-0.5"
                data-testid="deliverable-preview-button"
                aria-label={`Preview ${f.path}`}
                aria-pressed={preview === f.path}
                onClick={() => setPreview(preview === f.path ? null : f.path)}
              >
                Preview
              </button>
            )}
          </li>
        ))}
      </ul>
      {list.data.truncated && <p className="text-xs">The listing stopped at the server's cap.</p>}
      {preview && <Preview taskId={taskId} path={preview} />}
    </div>
  );
}

// cutShort reports whether a ranged answer left part of the file out: a
// 206 whose Content-Range total ("bytes 0-49/50") is larger than what was
// asked for. A file smaller than the range also comes back as 206.
export function cutShort(status: number, contentRange: string | null): boolean {
  if (status !== 206) return false;
  const total = Number(contentRange?.split("/")[1]);
  return !Number.isFinite(total) || total > previewLimit;
}

function Preview({ taskId, path }: { taskId: number; path: string }) {
  const api = useApi();
  const kind = previewKind(path);
  const q = useQuery({
    queryKey: ["deliverable-body", taskId, path],
    queryFn: async () => {
      const res = await api.raw(
        deliverableURL(taskId, path),
        kind === "image" ? {} : { Range: `bytes=0-${previewLimit - 1}` },
      );
      if (!res.ok) throw new Error(`${res.status} ${res.statusText}`);
      if (kind === "image") return { blob: await res.blob(), text: "", partial: false };
      return { blob: undefined, text: await res.text(), partial: cutShort(res.status, res.headers.get("Content-Range")) };
    },
  });
  const [imgURL, setImgURL] = useState<string>();
  useEffect(() => {
    if (!q.data?.blob) return;
    const u = URL.createObjectURL(q.data.blob);
    setImgURL(u);
    return () => URL.revokeObjectURL(u);
  }, [q.data]);

  return (
    <section data-testid="deliverable-preview" aria-label={`Preview of ${path}`} tabIndex={0} className="card overflow-auto">
      <p className="mb-2 font-mono text-xs wrap-anywhere">{path}</p>
      {q.isPending && <p className="text-sm">Loading…</p>}
      {q.error && <p className="error">{q.error.message}</p>}
      {q.data && kind === "image" && imgURL && <img src={imgURL} alt={path} className="max-h-[60vh] max-w-full" />}
      {q.data && kind === "markdown" && <Markdown text={q.data.text} />}
      {q.data && kind === "csv" && <CSVTable text={q.data.text} />}
      {q.data && kind === "text" && <pre tabIndex={0} className="max-h-[60vh] overflow-auto text-xs whitespace-pre-wrap wrap-anywhere">{q.data.text}</pre>}
      {q.data?.partial && <p className="mt-2 text-xs">Showing the first {formatBytes(previewLimit)}.</p>}
    </section>
  );
}

export function CSVTable({ text, maxRows = 500 }: { text: string; maxRows?: number }) {
  const rows = parseCSV(text, maxRows + 2);
  const [head, ...body] = rows;
  if (!head) return <p className="text-sm">Empty file.</p>;
  return (
    <div className="overflow-auto" tabIndex={0} role="region" aria-label="CSV table">
      <table className="min-w-full border-collapse text-xs">
        <thead>
          <tr>
            {head.map((h, i) => (
              <th key={i} scope="col" className="border border-slate-300 bg-slate-100 px-2 py-1 text-left dark:border-slate-700 dark:bg-slate-800">
                {h}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {body.slice(0, maxRows).map((r, i) => (
            <tr key={i}>
              {r.map((c, j) => (
                <td key={j} className="border border-slate-300 px-2 py-1 dark:border-slate-700">
                  {c}
                </td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
      {rows.length > maxRows + 1 && <p className="mt-1 text-xs">First {maxRows} rows shown.</p>}
    </div>
  );
}
