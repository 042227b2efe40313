import { useQuery } from "@tanstack/react-query";
import { useApi } from "../api/context";
import { useServerInfo } from "../lib/queries";
import { relativeTime, stateLabel } from "../lib/format";
import { states } from "../api/types";
import { Section } from "../components/Field";
import { queueFromMetrics } from "../lib/metrics";
import { ApiError } from "../api/client";

export default function Server() {
  const api = useApi();
  const info = useServerInfo(5000);
  const ready = useQuery({
    queryKey: ["readyz"],
    queryFn: async () => {
      const res = await api.raw("/readyz");
      return (await res.json()) as { status: string; error?: string };
    },
    refetchInterval: 5000,
  });
  // Queue depth: from /api/v1/server, else from the /metrics gauges.
  const metrics = useQuery({
    queryKey: ["metrics-queue"],
    enabled: info.isFetched && info.data?.queue === undefined,
    queryFn: async () => {
      const res = await api.raw("/metrics");
      if (!res.ok) throw new Error(`/metrics: ${res.status}`);
      return queueFromMetrics(await res.text());
    },
    refetchInterval: 5000,
  });
  const s = info.data;
  const queue = s?.queue ?? metrics.data ?? {};
  const known = [...states.filter((st) => st in queue), ...Object.keys(queue).filter((k) => !states.includes(k as never))];
  return (
    <section aria-labelledby="server-h" className="space-y-4">
      <h1 id="server-h" className="text-xl font-semibold">
        Server
      </h1>
      {info.error && (
        <p className="error" role="alert">
          {info.error instanceof ApiError && info.error.status === 404
            ? "This server does not answer GET /api/v1/server (an older maestro): version, store and workers are unknown; the queue comes from /metrics."
            : info.error.message}
        </p>
      )}
      {/* A value wraps anywhere: a store's error may quote a long URL. */}
      <dl className="card grid grid-cols-[auto_minmax(0,1fr)] gap-x-4 gap-y-1 text-sm [&>dd]:wrap-anywhere">
        <dt className="font-semibold">Version</dt>
        <dd data-testid="server-version">{s?.version ?? "—"}</dd>
        <dt className="font-semibold">Store</dt>
        <dd data-testid="server-store">{s?.store === "postgres" ? "PostgreSQL" : s?.store === "sqlite" ? "SQLite" : (s?.store ?? "—")}</dd>
        <dt className="font-semibold">Default executor</dt>
        <dd>{s?.executor_default ?? "—"}</dd>
        <dt className="font-semibold">Started</dt>
        <dd>{s?.started_at ? new Date(s.started_at).toLocaleString() : "—"}</dd>
        <dt className="font-semibold">Ready</dt>
        <dd data-testid="server-ready">{ready.data ? `${ready.data.status}${ready.data.error ? `: ${ready.data.error}` : ""}` : "—"}</dd>
      </dl>
      <Section id="queue-h" title="Queue depth by state">
        <ul data-testid="queue-depth" className="grid grid-cols-2 gap-x-6 gap-y-1 text-sm sm:grid-cols-3">
          {known.map((st) => (
            <li key={st} data-testid="queue-state" data-state={st} data-count={queue[st] ?? 0} className="flex justify-between gap-2">
              <span>{stateLabel(st)}</span>
              <span className="font-mono">{queue[st] ?? 0}</span>
            </li>
          ))}
        </ul>
      </Section>
      <Section id="workers-h" title="Workers">
        {(s?.workers ?? []).length === 0 && <p className="text-sm">No workers seen.</p>}
        <ul className="space-y-1 text-sm">
          {(s?.workers ?? []).map((w) => (
            <li key={w.id} data-testid="worker-row" className="flex flex-wrap gap-x-3">
              <span className="min-w-0 font-mono wrap-anywhere">{w.id}</span>
              {w.host && <span className="min-w-0 wrap-anywhere">{w.host}</span>}
              <span>
                {(w.running_jobs ?? []).length === 0
                  ? "idle"
                  : `running ${(w.running_jobs ?? []).map((j) => `#${j}`).join(", ")}`}
              </span>
              {w.last_seen && <span className="text-xs text-slate-600 dark:text-slate-400">seen {relativeTime(w.last_seen)}</span>}
            </li>
          ))}
        </ul>
      </Section>
    </section>
  );
}
