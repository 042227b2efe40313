import createClient, { type Middleware } from "openapi-fetch";
import type { paths } from "./schema";
import type { ApiErrorBody } from "./types";
import { authHeaders } from "./auth";

export type Api = ReturnType<typeof createApi>;

// ApiError is what every failed call throws: the status and the server's
// api.Error body (docs/api.md, "Errors").
export class ApiError extends Error {
  readonly status: number;
  readonly body: ApiErrorBody | undefined;
  constructor(status: number, body: ApiErrorBody | undefined, fallback: string) {
    super(body?.error ?? fallback);
    this.status = status;
    this.body = body;
  }
  get field(): string | undefined {
    return this.body?.field;
  }
}

export interface ApiOptions {
  baseUrl?: string;
  fetch?: typeof fetch;
  getToken: () => string | null;
  // Called on any 401, before the call's promise rejects.
  onUnauthorized: () => void;
}

// Unreachable is what a call throws when no answer came at all (the
// server stopped, the network is down): the browser's own error says only
// "Failed to fetch" (Chrome) or "NetworkError when attempting to fetch
// resource" (Firefox), which does not tell a user what to do.
export class Unreachable extends Error {
  constructor(cause: unknown) {
    super(`The server does not answer: is maestro serve running? (${cause instanceof Error ? cause.message : String(cause)})`);
    this.name = "Unreachable";
  }
}

// reach calls fetch and turns a failure to get any answer into Unreachable;
// an aborted call stays an AbortError.
export async function reach(f: (req: Request) => Promise<Response>, req: Request): Promise<Response> {
  try {
    return await f(req);
  } catch (err) {
    if (err instanceof TypeError) throw new Unreachable(err);
    throw err;
  }
}

// createApi returns the typed client of docs/openapi.yaml (openapi-fetch):
// it sends the bearer token when one is stored and reports 401s.
export function createApi(opts: ApiOptions) {
  const client = createClient<paths>({
    baseUrl: opts.baseUrl ?? "",
    fetch: (req: Request) => reach((r) => (opts.fetch ?? fetch)(r), req),
  });
  const auth: Middleware = {
    onRequest({ request }) {
      for (const [k, v] of Object.entries(authHeaders(opts.getToken()))) request.headers.set(k, v);
      return request;
    },
    onResponse({ response }) {
      if (response.status === 401) opts.onUnauthorized();
      return response;
    },
  };
  client.use(auth);
  return {
    client,
    opts,
    // raw issues a request outside the typed routes (GET /api/v1/server until
    // its openapi entry lands, deliverable bodies for previews).
    async raw(path: string, headers: Record<string, string> = {}): Promise<Response> {
      const f = opts.fetch ?? fetch;
      const url = new URL(path, opts.baseUrl || window.location.origin);
      const res = await reach(f, new Request(url, { headers: { ...headers, ...authHeaders(opts.getToken()) } }));
      if (res.status === 401) opts.onUnauthorized();
      return res;
    },
  };
}

// unwrap turns an openapi-fetch result into its data or an ApiError.
export function unwrap<T>(r: { data?: T; error?: unknown; response: Response }): T {
  if (r.error !== undefined || !r.response.ok) {
    const body = (r.error ?? undefined) as ApiErrorBody | undefined;
    throw new ApiError(r.response.status, body, `${r.response.status} ${r.response.statusText}`);
  }
  return r.data as T;
}

export async function rawJSON<T>(res: Response): Promise<T> {
  if (!res.ok) {
    let body: ApiErrorBody | undefined;
    try {
      body = (await res.json()) as ApiErrorBody;
    } catch {
      body = undefined;
    }
    throw new ApiError(res.status, body, `${res.status} ${res.statusText}`);
  }
  return (await res.json()) as T;
}
