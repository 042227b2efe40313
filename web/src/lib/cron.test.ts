import { describe, expect, it } from "vitest";
import { explainCron } from "./cron";

// The server reads an expression in UTC (or the zone of its CRON_TZ=
// prefix), whatever the zone of the machine or the browser: build the
// expected instants in UTC.
const utc = (y: number, mo: number, d: number, h: number, mi: number) => new Date(Date.UTC(y, mo, d, h, mi));
const from = utc(2026, 10, 26, 8, 30); // Thu 26 Nov 2026 08:30 UTC

describe("explainCron", () => {
  const cases: { expr: string; words?: RegExp; next?: Date[]; error?: RegExp }[] = [
    {
      expr: "0 9 * * 1",
      words: /09:00.*Monday.*\(UTC\)$/,
      next: [0, 1, 2, 3, 4].map((w) => utc(2026, 10, 30 + 7 * w, 9, 0)), // Mondays from 30 Nov
    },
    {
      expr: "*/15 * * * *",
      words: /Every 15 minutes/,
      next: [45, 60, 75, 90, 105].map((m) => utc(2026, 10, 26, 8, m)),
    },
    { expr: "@daily", words: /00:00/, next: [1, 2, 3, 4, 5].map((d) => utc(2026, 10, 26 + d, 0, 0)) },
    {
      // 09:00 in Paris is 08:00 UTC in November.
      expr: "CRON_TZ=Europe/Paris 0 9 * * *",
      words: /09:00 \(Europe\/Paris\)$/,
      next: [1, 2, 3, 4, 5].map((d) => utc(2026, 10, 26 + d, 8, 0)),
    },
    { expr: "TZ=UTC 30 8 * * *", words: /08:30 \(UTC\)$/, next: [1, 2, 3, 4, 5].map((d) => utc(2026, 10, 26 + d, 8, 30)) },
    { expr: "CRON_TZ=Mars/Olympus 0 9 * * *", error: /unknown time zone/ },
    {
      expr: "@every 1h30m",
      words: /Every 1h30m/,
      next: [1, 2, 3, 4, 5].map((i) => new Date(from.getTime() + i * 90 * 60e3)),
    },
    { expr: "0 9 * *", error: /five fields/ },
    { expr: "61 * * * *", error: /./ },
    { expr: "@fortnightly", error: /unknown descriptor/ },
    { expr: "@every soon", error: /duration/ },
    // The server refuses what is under a second or not whole seconds (the
    // parser took them as every second): the preview showed their runs.
    { expr: "@every 0s", error: /whole seconds, at least 1s/ },
    { expr: "@every 500ms", error: /whole seconds, at least 1s/ },
    { expr: "@every 1.5s", error: /whole seconds, at least 1s/ },
    { expr: "  ", error: /required/ },
  ];
  for (const c of cases) {
    it(c.expr.trim() || "(empty)", () => {
      const got = explainCron(c.expr, from);
      if (c.error) {
        expect(got.error).toMatch(c.error);
        expect(got.next).toEqual([]);
        return;
      }
      expect(got.error).toBeUndefined();
      expect(got.words).toMatch(c.words!);
      expect(got.next.map((d) => d.getTime())).toEqual(c.next!.map((d) => d.getTime()));
    });
  }
});
