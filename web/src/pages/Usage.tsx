import { useState } from "react";
import { Link } from "react-router";
import { useQuery } from "@tanstack/react-query";
import { useApi } from "../api/context";
import { unwrap } from "../api/client";
import type { components } from "../api/schema";
import { CheckboxField, SelectField, Section } from "../components/Field";
import { formatCost } from "../lib/format";

type UsageReport = components["schemas"]["UsageReport"];
type GroupBy = UsageReport["group_by"];
type Measure = "cost_usd" | "input_tokens" | "output_tokens";

const groupings: { value: GroupBy; label: string }[] = [
  { value: "day", label: "Day" },
  { value: "model", label: "Model" },
  { value: "provider", label: "Provider / agent CLI" },
  { value: "piece", label: "Piece" },
  { value: "executor", label: "Executor" },
];

const day = (d: Date) => d.toISOString().slice(0, 10);
const tokens = (n: number) => n.toLocaleString("en-US");

// The Usage page: what the jobs of a window spent (GET /api/v1/usage),
// totals, a bar chart and a table by the chosen grouping, the costliest
// tasks, and the month's cost against the configured budget.
export default function Usage() {
  const api = useApi();
  const [from, setFrom] = useState(() => day(new Date(Date.now() - 29 * 86_400_000)));
  const [to, setTo] = useState(() => day(new Date()));
  const [groupBy, setGroupBy] = useState<GroupBy>("day");
  const [replay, setReplay] = useState(false);
  const [measure, setMeasure] = useState<Measure>("cost_usd");
  // to is inclusive on the page: the API's window ends the next midnight.
  const toExclusive = to ? day(new Date(Date.parse(to) + 86_400_000)) : undefined;
  const report = useQuery({
    queryKey: ["usage", from, toExclusive, groupBy, replay],
    queryFn: async () =>
      unwrap(
        await api.client.GET("/api/v1/usage", {
          params: { query: { from: from || undefined, to: toExclusive, group_by: groupBy, include_replay: replay } },
        }),
      ),
    refetchInterval: 30_000,
  });
  const r = report.data;
  return (
    <section aria-labelledby="usage-h" className="space-y-4">
      <h1 id="usage-h" className="text-xl font-semibold">
        Usage and cost
      </h1>
      <form className="card grid gap-3 sm:grid-cols-5" onSubmit={(e) => e.preventDefault()} aria-label="Usage window">
        <div>
          <label htmlFor="usage-from" className="label">
            From
          </label>
          <input id="usage-from" data-testid="usage-from" type="date" className="input" value={from} onChange={(e) => setFrom(e.target.value)} />
        </div>
        <div>
          <label htmlFor="usage-to" className="label">
            To (inclusive)
          </label>
          <input id="usage-to" data-testid="usage-to" type="date" className="input" value={to} onChange={(e) => setTo(e.target.value)} />
        </div>
        <SelectField id="usage-group" label="Group by" value={groupBy} options={groupings} onChange={(v) => setGroupBy(v as GroupBy)} />
        <SelectField
          id="usage-measure"
          label="Chart"
          value={measure}
          options={[
            { value: "cost_usd", label: "Cost" },
            { value: "input_tokens", label: "Input tokens" },
            { value: "output_tokens", label: "Output tokens" },
          ]}
          onChange={(v) => setMeasure(v as Measure)}
        />
        <div className="self-end pb-2">
          <CheckboxField id="usage-replay" label="Include replay" checked={replay} onChange={setReplay} />
        </div>
      </form>
      {report.error && (
        <p className="error" role="alert">
          {report.error.message}
        </p>
      )}
      {r && (
        <>
          <dl className="card grid grid-cols-2 gap-3 text-sm sm:grid-cols-4" data-testid="usage-totals">
            <Total label="Cost" value={formatCost(r.totals.cost_usd)} testId="usage-total-cost" usd={r.totals.cost_usd} />
            <Total label="Jobs" value={String(r.totals.jobs)} testId="usage-total-jobs" />
            <Total label="Input tokens" value={tokens(r.totals.input_tokens)} testId="usage-total-input" />
            <Total label="Output tokens" value={tokens(r.totals.output_tokens)} testId="usage-total-output" />
          </dl>
          {r.budget_usd_month > 0 && <Budget budget={r.budget_usd_month} spent={r.month_cost_usd} />}
          <Section id="usage-chart-h" title={`${measure === "cost_usd" ? "Cost" : measure === "input_tokens" ? "Input tokens" : "Output tokens"} by ${groupBy}`}>
            <Bars report={r} measure={measure} />
          </Section>
          <Section id="usage-table-h" title={`By ${groupBy}`}>
            <GroupTable report={r} />
          </Section>
          <Section id="usage-top-h" title="Costliest tasks">
            {r.top_tasks.length === 0 ? (
              <p className="text-sm">No task cost anything in this window.</p>
            ) : (
              <ol className="space-y-1 text-sm" data-testid="usage-top-tasks">
                {r.top_tasks.map((t) => (
                  <li key={t.task_id} className="flex flex-wrap gap-x-3">
                    <Link to={`/tasks/${t.task_id}`} className="font-medium text-sky-800 hover:underline dark:text-sky-300">
                      #{t.task_id} {t.title}
                    </Link>
                    <span>{formatCost(t.cost_usd)}</span>
                    <span className="text-slate-600 dark:text-slate-400">
                      {[t.piece, t.model, `${t.jobs} job${t.jobs === 1 ? "" : "s"}`].filter(Boolean).join(" · ")}
                    </span>
                  </li>
                ))}
              </ol>
            )}
          </Section>
        </>
      )}
    </section>
  );
}

function Total({ label, value, testId, usd }: { label: string; value: string; testId: string; usd?: number }) {
  return (
    <div>
      <dt className="text-xs text-slate-600 dark:text-slate-400">{label}</dt>
      <dd className="text-lg font-semibold" data-testid={testId} data-usd={usd}>
        {value}
      </dd>
    </div>
  );
}

// Budget draws the month's cost as a share of the configured budget.
function Budget({ budget, spent }: { budget: number; spent: number }) {
  const share = spent / budget;
  const over = share > 1;
  return (
    <section aria-labelledby="usage-budget-h" className="card text-sm" data-testid="usage-budget">
      <h2 id="usage-budget-h" className="mb-2 text-sm font-semibold">
        Budget this month
      </h2>
      <div
        role="meter"
        aria-valuemin={0}
        aria-valuemax={budget}
        aria-valuenow={Math.min(spent, budget)}
        aria-label="Month's cost against the budget"
        className="h-3 w-full overflow-hidden rounded bg-slate-200 dark:bg-slate-700"
      >
        <div className={`h-full ${over ? "bg-red-600" : "bg-emerald-600"}`} style={{ width: `${Math.min(100, share * 100)}%` }} />
      </div>
      <p className="mt-1">
        {formatCost(spent)} of {formatCost(budget)} ({Math.round(share * 100)} %){over ? ": over budget" : ""}
      </p>
    </section>
  );
}

const label = (key: string) => key || "(not recorded)";

// Bars is a horizontal bar chart of one measure by group: plain CSS, so
// it reads at any width and needs no chart library.
function Bars({ report, measure }: { report: UsageReport; measure: Measure }) {
  if (report.groups.length === 0)
    return (
      <p className="text-sm" data-testid="usage-empty">
        {/* On a replay-only server every job is left out by default: say why the window is empty. */}
        No jobs in this window{report.include_replay ? "." : ": replay jobs are left out (tick Include replay to count them)."}
      </p>
    );
  const max = Math.max(...report.groups.map((g) => g[measure]), 0);
  const budgetPerDay = report.group_by === "day" && measure === "cost_usd" && report.budget_usd_month > 0 ? report.budget_usd_month / 30 : 0;
  const scale = Math.max(max, budgetPerDay) || 1;
  return (
    <ul className="space-y-1 text-sm" data-testid="usage-bars" aria-label="Chart">
      {report.groups.map((g) => (
        <li key={g.key} className="grid grid-cols-[minmax(6rem,12rem)_1fr_auto] items-center gap-2">
          <span className="truncate" title={label(g.key)}>
            {label(g.key)}
          </span>
          <span className="relative h-4 rounded bg-slate-100 dark:bg-slate-800">
            <span className="absolute inset-y-0 left-0 rounded bg-sky-600" style={{ width: `${(g[measure] / scale) * 100}%` }} />
            {budgetPerDay > 0 && (
              <span
                className="absolute inset-y-0 w-0.5 bg-red-600"
                style={{ left: `${(budgetPerDay / scale) * 100}%` }}
                title={`a 30th of the monthly budget: ${formatCost(budgetPerDay)}`}
              />
            )}
          </span>
          <span className="tabular-nums">{measure === "cost_usd" ? formatCost(g.cost_usd) : tokens(g[measure])}</span>
        </li>
      ))}
      {budgetPerDay > 0 && <li className="text-xs text-slate-600 dark:text-slate-400">Red line: a 30th of the monthly budget ({formatCost(budgetPerDay)} a day).</li>}
    </ul>
  );
}

function GroupTable({ report }: { report: UsageReport }) {
  return (
    <div className="overflow-x-auto">
      <table className="w-full text-left text-sm" data-testid="usage-table">
        <thead>
          <tr>
            <th scope="col" className="py-1 pr-3">
              {groupings.find((g) => g.value === report.group_by)?.label}
            </th>
            <th scope="col" className="py-1 pr-3 text-right">
              Jobs
            </th>
            <th scope="col" className="py-1 pr-3 text-right">
              Cost
            </th>
            <th scope="col" className="py-1 pr-3 text-right">
              Input tokens
            </th>
            <th scope="col" className="py-1 text-right">
              Output tokens
            </th>
          </tr>
        </thead>
        <tbody>
          {report.groups.map((g) => (
            <tr key={g.key} className="border-t border-slate-200 dark:border-slate-700">
              <th scope="row" className="py-1 pr-3 font-normal">
                {label(g.key)}
              </th>
              <td className="py-1 pr-3 text-right tabular-nums">{g.jobs}</td>
              <td className="py-1 pr-3 text-right tabular-nums">{formatCost(g.cost_usd)}</td>
              <td className="py-1 pr-3 text-right tabular-nums">{tokens(g.input_tokens)}</td>
              <td className="py-1 text-right tabular-nums">{tokens(g.output_tokens)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
