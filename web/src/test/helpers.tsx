import type { ReactNode } from "react";
import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { MemoryRouter } from "react-router";
import { ApiContext } from "../api/context";
import { createApi } from "../api/client";

export const base = "http://maestro.test";

export function json(body: unknown, status = 200): Response {
  return new Response(JSON.stringify(body), { status, headers: { "Content-Type": "application/json" } });
}

// Wrap renders ui with a real API client on the given fetch, a query client
// without retries and a memory router.
export function Wrap({ children, fetch: f, path = "/" }: { children: ReactNode; fetch: typeof fetch; path?: string }) {
  const api = createApi({ baseUrl: base, fetch: f, getToken: () => null, onUnauthorized: () => undefined });
  const qc = new QueryClient({ defaultOptions: { queries: { retry: false } } });
  return (
    <MemoryRouter initialEntries={[path]}>
      <ApiContext.Provider value={api}>
        <QueryClientProvider client={qc}>{children}</QueryClientProvider>
      </ApiContext.Provider>
    </MemoryRouter>
  );
}

// toRequest gives the Request a fetch call means, whichever form it took.
export function toRequest(input: RequestInfo | URL, init?: RequestInit): Request {
  return input instanceof Request ? input : new Request(input, init);
}
