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
  return ms;
}

// zonePrefix reads the CRON_TZ=Zone (or TZ=Zone) prefix the server takes:
// the zone the expression is read in, and the expression after it. Without
// one the server reads the expression in UTC (docs/queue.md).
function zonePrefix(expr: string): { zone: string; rest: string } {
  const m = /^(?:CRON_TZ|TZ)=(\S+)\s+(.*)$/.exec(expr);
  return m && m[1] && m[2] !== undefined ? { zone: m[1], rest: m[2].trim() } : { zone: "UTC", rest: expr };
}

// knownZone reports whether the browser knows an IANA time zone name.
function knownZone(zone: string): boolean {
  try {
    new Intl.DateTimeFormat("en", { timeZone: zone });
    return true;
  } catch {
    return false;
  }
}

// explainCron says a schedule's expression in words and lists its next runs,
// for the five-field form and the descriptors the server takes (docs/api.md,
// "Schedules"). The expression is read in the zone the server reads it in:
// UTC, or the zone of a CRON_TZ= prefix; the words name that zone and the
// runs are instants (shown in the browser's local time). The server stays
// the judge: it answers 422 naming cron_expr for what it refuses.
export function explainCron(expr: string, from: Date = new Date(), count = 5): CronExplanation {
  const { zone, rest: e } = zonePrefix(expr.trim());
  if (!e) return { words: "", next: [], error: "an expression is required" };
  if (!knownZone(zone)) return { words: "", next: [], error: `"${zone}": unknown time zone (expected an IANA name such as Europe/Paris)` };
  const every = e.startsWith("@every") ? parseEvery(e) : undefined;
  if (e.startsWith("@every")) {
    if (every === undefined) return { words: "", next: [], error: `"${e}": expected @every and a duration such as 1h or 30m` };
    // As the server: under a second, or a fraction of one, is refused.
    if (every < 1000 || every % 1000 !== 0)
      return { words: "", next: [], error: `"${e}": expected a duration of whole seconds, at least 1s (such as 5m or 1h30m)` };
    const next = Array.from({ length: count }, (_, i) => new Date(from.getTime() + every * (i + 1)));
    return { words: `Every ${e.slice(6).trim()}`, next };
  }
  const five = descriptors[e] ?? e;
  if (five.startsWith("@")) return { words: "", next: [], error: `"${e}": unknown descriptor` };
  if (five.split(/\s+/).length !== 5)
    return { words: "", next: [], error: "expected five fields: minute hour day-of-month month day-of-week" };
  try {
    const words = `${cronstrue.toString(five, { use24HourTimeFormat: true, verbose: false })} (${zone})`;
    const it = CronExpressionParser.parse(five, { currentDate: from, tz: zone });
    const next = it.take(count).map((d) => d.toDate());
    return { words, next };
  } catch (err) {
    return { words: "", next: [], error: err instanceof Error ? err.message : String(err) };
  }
}
