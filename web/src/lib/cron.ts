import cronstrue from "cronstrue";
import { CronExpressionParser } from "cron-parser";

export interface CronExplanation {
  words: string;
  next: Date[];
  error?: string;
}

const descriptors: Record<string, string> = {
  "@yearly": "0 0 1 1 *",
  "@annually": "0 0 1 1 *",
  "@monthly": "0 0 1 * *",
  "@weekly": "0 0 * * 0",
  "@daily": "0 0 * * *",
  "@midnight": "0 0 * * *",
  "@hourly": "0 * * * *",
};

// parseEvery reads "@every 1h30m" (Go duration units h, m, s) into ms.
function parseEvery(spec: string): number | undefined {
  const m = /^@every\s+((?:\d+(?:\.\d+)?(?:h|m|s|ms))+)$/.exec(spec.trim());
  if (!m || !m[1]) return undefined;
  let ms = 0;
  for (const part of m[1].matchAll(/(\d+(?:\.\d+)?)(ms|h|m|s)/g)) {
    const v = Number(part[1]);
    ms += part[2] === "h" ? v * 3600e3 : part[2] === "m" ? v * 60e3 : part[2] === "s" ? v * 1e3 : v;
  }
  return ms > 0 ? ms : undefined;
}

// explainCron says a schedule's expression in words and lists its next runs
// (local time), for the five-field form and the descriptors the server
// takes (docs/api.md, "Schedules"). The server stays the judge: it answers
// 422 naming cron_expr for what it refuses.
export function explainCron(expr: string, from: Date = new Date(), count = 5): CronExplanation {
  const e = expr.trim();
  if (!e) return { words: "", next: [], error: "an expression is required" };
  const every = e.startsWith("@every") ? parseEvery(e) : undefined;
  if (e.startsWith("@every")) {
    if (every === undefined) return { words: "", next: [], error: `"${e}": expected @every and a duration such as 1h or 30m` };
    const next = Array.from({ length: count }, (_, i) => new Date(from.getTime() + every * (i + 1)));
    return { words: `Every ${e.slice(6).trim()}`, next };
  }
  const five = descriptors[e] ?? e;
  if (five.startsWith("@")) return { words: "", next: [], error: `"${e}": unknown descriptor` };
  if (five.split(/\s+/).length !== 5)
    return { words: "", next: [], error: "expected five fields: minute hour day-of-month month day-of-week" };
  try {
    const words = cronstrue.toString(five, { use24HourTimeFormat: true, verbose: false });
    const it = CronExpressionParser.parse(five, { currentDate: from });
    const next = it.take(count).map((d) => d.toDate());
    return { words, next };
  } catch (err) {
    return { words: "", next: [], error: err instanceof Error ? err.message : String(err) };
  }
}
