import { useQuery } from "@tanstack/react-query";
import { useApi } from "../api/context";
import { rawJSON, unwrap } from "../api/client";
import type { Job, ServerInfo } from "../api/types";

// useServerInfo reads GET /api/v1/server (version, store, default executor,
// workers, queue); undefined while loading or when the server has no such
// route yet.
export function useServerInfo(refetchInterval: number | false = false) {
  const api = useApi();
  return useQuery({
    queryKey: ["server"],
    queryFn: async () => rawJSON<ServerInfo>(await api.raw("/api/v1/server")),
    staleTime: 30_000,
    refetchInterval,
  });
}

// executorOf names the executor a job runs on, for its badge: what the
// job's log said (seen: the latest ready's executor_type, or "agent-cli"
// once a movement ran on an agent CLI), else what its payload asks
// (executor, or a replay scenario), else the server's default. Replay is
// REPLAY wherever it comes from.
export function executorOf(job: Pick<Job, "payload"> | undefined, server: ServerInfo | undefined, seen?: string): string {
  const label = (e: string) => (e === "replay" ? "REPLAY" : e === "live" ? "native" : e === "agent-cli" ? "agent CLI" : e);
  if (seen) return label(seen);
  const payload = (job?.payload ?? {}) as Record<string, unknown>;
  if (typeof payload.executor === "string" && payload.executor) return label(payload.executor);
  if (payload.replay !== undefined && payload.replay !== null) return "REPLAY";
  const d = server?.executor_default;
  return d ? label(d) : "—";
}

// usePieceOptions lists the piece catalog (GET /api/v1/pieces) as the
// options of a piece picker, "auto" (the classifier chooses) first.
export function usePieceOptions(): { value: string; label: string }[] {
  const api = useApi();
  const q = useQuery({
    queryKey: ["pieces"],
    queryFn: async () => unwrap(await api.client.GET("/api/v1/pieces")).pieces,
    staleTime: 60_000,
  });
  return [{ value: "", label: "auto" }, ...(q.data ?? []).map((p) => ({ value: p.name, label: p.name }))];
}
