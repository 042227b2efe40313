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

// executorOf names the executor a job runs on: a job whose payload carries
// a replay scenario, or any job of a server whose default is replay, is
// REPLAY; otherwise the server's default (native model) unless known better.
export function executorOf(job: Pick<Job, "payload"> | undefined, server: ServerInfo | undefined, seen?: string): string {
  if (seen) return seen === "replay" ? "REPLAY" : seen === "live" ? "model" : seen;
  const payload = (job?.payload ?? {}) as Record<string, unknown>;
  if (payload.replay !== undefined && payload.replay !== null) return "REPLAY";
  const d = server?.executor_default;
  if (d === "replay") return "REPLAY";
  return d ?? "—";
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
