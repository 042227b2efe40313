// queueFromMetrics reads the `maestro_jobs{state="…"} N` gauges of the
// server's Prometheus text (GET /metrics, docs/api.md "Operations"): the
// queue depth by state, for servers whose GET /api/v1/server does not say it.
export function queueFromMetrics(text: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const line of text.split("\n")) {
    const m = /^maestro_jobs\{state="([a-z_]+)"\}\s+([0-9.eE+-]+)\s*$/.exec(line);
    if (m && m[1] && m[2]) out[m[1]] = Number(m[2]);
  }
  return out;
}
