import { authHeaders } from "../api/auth";
import type { ApiErrorBody } from "../api/types";

export interface UploadResult {
  status: number;
  body: unknown;
}

// fileProgress splits the bytes sent of one multipart request over its files
// (they are sent in order), giving each file's fraction done.
export function fileProgress(sizes: number[], loaded: number, total: number): number[] {
  const payload = sizes.reduce((a, b) => a + b, 0);
  // The multipart framing adds bytes; spread them so 100% means all sent.
  const scale = total > 0 && payload > 0 ? payload / total : 1;
  let sent = loaded * scale;
  return sizes.map((s) => {
    if (s === 0) return sent >= 0 && loaded >= total ? 1 : 0;
    const part = Math.max(0, Math.min(s, sent));
    sent -= s;
    return part / s;
  });
}

// createTaskWithFiles sends POST /api/v1/tasks as multipart/form-data (the
// "task" JSON part, then one "file" part per file: docs/api.md, "Files with
// the task") over XMLHttpRequest, which reports upload progress.
export function createTaskWithFiles(
  url: string,
  task: object,
  files: File[],
  onProgress: (fractions: number[]) => void,
  token: string | null,
): Promise<UploadResult> {
  const form = new FormData();
  form.append("task", new Blob([JSON.stringify(task)], { type: "application/json" }));
  for (const f of files) form.append("file", f, f.name);
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open("POST", url);
    for (const [k, v] of Object.entries(authHeaders(token))) xhr.setRequestHeader(k, v);
    xhr.upload.onprogress = (e) => {
      if (e.lengthComputable) onProgress(fileProgress(files.map((f) => f.size), e.loaded, e.total));
    };
    xhr.onload = () => {
      let body: unknown;
      try {
        body = JSON.parse(xhr.responseText);
      } catch {
        body = { error: xhr.responseText || `${xhr.status}` } satisfies ApiErrorBody;
      }
      if (xhr.status >= 200 && xhr.status < 300) onProgress(files.map(() => 1));
      resolve({ status: xhr.status, body });
    };
    xhr.onerror = () => reject(new Error("the upload failed (network error)"));
    xhr.onabort = () => reject(new Error("the upload was aborted"));
    xhr.send(form);
  });
}
