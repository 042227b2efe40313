import { describe, expect, it } from "vitest";
import { render, screen, waitFor } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import Usage from "./Usage";
import { json, toRequest, Wrap } from "../test/helpers";

const report = (groupBy: string, budget: number) => ({
  from: "2026-10-28T00:00:00Z",
  to: "2026-11-27T00:00:00Z",
  group_by: groupBy,
  include_replay: false,
  totals: { jobs: 3, cost_usd: 1.5, input_tokens: 12000, output_tokens: 800 },
  groups: [
    { key: "anthropic/claude-x", jobs: 2, cost_usd: 1.25, input_tokens: 10000, output_tokens: 600 },
    { key: "", jobs: 1, cost_usd: 0.25, input_tokens: 2000, output_tokens: 200 },
  ],
  top_tasks: [{ task_id: 7, title: "Costly", piece: "review", model: "anthropic/claude-x", jobs: 2, cost_usd: 1.25, input_tokens: 10000, output_tokens: 600 }],
  budget_usd_month: budget,
  month_cost_usd: 1.5,
});

describe("Usage", () => {
  it("shows the totals, the groups, the costliest tasks and the budget, and asks again with the grouping and replay chosen", async () => {
    const asked: URL[] = [];
    const f = async (input: RequestInfo | URL, init?: RequestInit) => {
      const url = new URL(toRequest(input, init).url);
      asked.push(url);
      return json(report(url.searchParams.get("group_by") ?? "day", 10));
    };
    render(
      <Wrap fetch={f as typeof fetch} path="/usage">
        <Usage />
      </Wrap>,
    );
    expect(await screen.findByTestId("usage-total-cost")).toHaveTextContent("$1.50");
    expect(screen.getByTestId("usage-total-input")).toHaveTextContent("12,000");
    expect(screen.getByTestId("usage-table")).toHaveTextContent("(not recorded)");
    expect(screen.getByTestId("usage-top-tasks")).toHaveTextContent("#7 Costly");
    expect(screen.getByTestId("usage-budget")).toHaveTextContent("$1.50 of $10.00 (15 %)");
    expect(asked[0]?.searchParams.get("include_replay")).toBe("false");

    await userEvent.selectOptions(screen.getByTestId("usage-group"), "model");
    await userEvent.click(screen.getByTestId("usage-replay"));
    await waitFor(() => expect(asked.some((u) => u.searchParams.get("group_by") === "model" && u.searchParams.get("include_replay") === "true")).toBe(true));
  });

  // An empty window without replay says replay jobs are left out: on a
  // replay-only server the page said "No jobs in this window." beside a
  // task list of finished jobs.
  it("says replay jobs are left out when the window is empty without them", async () => {
    const f = async () => json({ ...report("day", 0), totals: { jobs: 0, cost_usd: 0, input_tokens: 0, output_tokens: 0 }, groups: [], top_tasks: [] });
    render(
      <Wrap fetch={f as typeof fetch} path="/usage">
        <Usage />
      </Wrap>,
    );
    expect(await screen.findByTestId("usage-empty")).toHaveTextContent("No jobs in this window: replay jobs are left out (tick Include replay to count them).");
  });
});
