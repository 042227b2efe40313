export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  const units = ["KiB", "MiB", "GiB", "TiB"];
  let v = n / 1024;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v.toFixed(v < 10 ? 1 : 0)} ${units[i]}`;
}

export function formatCost(usd: number | undefined): string {
  if (usd === undefined) return "—";
  if (usd === 0) return "$0.00";
  return usd < 0.01 ? `$${usd.toFixed(4)}` : `$${usd.toFixed(2)}`;
}

export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) return "—";
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${s % 60}s`;
  return `${Math.floor(m / 60)}h ${m % 60}m`;
}

export function relativeTime(iso: string | undefined, now = Date.now()): string {
  if (!iso) return "—";
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return "—";
  const s = Math.round((now - t) / 1000);
  if (s < 5) return "just now";
  if (s < 60) return `${s}s ago`;
  if (s < 3600) return `${Math.floor(s / 60)}m ago`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ago`;
  return new Date(t).toLocaleDateString();
}

export function stateLabel(state: string | undefined): string {
  switch (state) {
    case "waiting_human":
      return "waiting for you";
    case "waiting_subtasks":
      return "waiting for subtasks";
    case undefined:
    case "":
      return "—";
    default:
      return state;
  }
}

export function stateClass(state: string | undefined): string {
  switch (state) {
    case "succeeded":
      return "bg-emerald-100 text-emerald-900 dark:bg-emerald-900 dark:text-emerald-100";
    case "failed":
    case "aborted":
      return "bg-red-100 text-red-900 dark:bg-red-900 dark:text-red-100";
    case "cancelled":
      return "bg-slate-200 text-slate-800 dark:bg-slate-700 dark:text-slate-100";
    case "waiting_human":
      return "bg-amber-200 text-amber-950 dark:bg-amber-700 dark:text-amber-50";
    case "running":
    case "dispatching":
      return "bg-sky-100 text-sky-900 dark:bg-sky-900 dark:text-sky-100";
    default:
      return "bg-violet-100 text-violet-900 dark:bg-violet-900 dark:text-violet-100";
  }
}
