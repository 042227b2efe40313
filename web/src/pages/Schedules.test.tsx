import { describe, expect, it } from "vitest";
import { render, screen } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import Schedules from "./Schedules";
import { json, toRequest, Wrap } from "../test/helpers";

describe("Schedules", () => {
  // A refused expression is shown under the field labelled "Cron
  // expression"; it began with the API's name of that field ("cron_expr:
  // cron expression …").
  it("shows a field's error under it without the API's field name", async () => {
    const msg = 'cron expression "0 9 * * 1 *": 6 fields where 5 are expected (minute hour day-of-month month day-of-week): the last, "*", is extra (there is no seconds or year field)';
    const f = async (input: RequestInfo | URL, init?: RequestInit) => {
      const req = toRequest(input, init);
      const url = new URL(req.url);
      if (url.pathname === "/api/v1/schedules" && req.method === "POST") return json({ error: `cron_expr: ${msg}`, field: "cron_expr" }, 422);
      if (url.pathname === "/api/v1/schedules") return json({ schedules: [] });
      return json({ pieces: [] });
    };
    render(
      <Wrap fetch={f as typeof fetch} path="/schedules">
        <Schedules />
      </Wrap>,
    );
    await userEvent.click(await screen.findByTestId("new-schedule-button"));
    await userEvent.type(screen.getByLabelText("Name"), "weekly");
    await userEvent.type(screen.getByLabelText("Task title"), "report");
    await userEvent.click(screen.getByTestId("schedule-save"));
    const alert = await screen.findByRole("alert");
    expect(alert).toHaveTextContent(msg);
    expect(alert.textContent?.startsWith("cron_expr")).toBe(false);
    expect(screen.getByLabelText("Cron expression")).toHaveAttribute("aria-describedby", "err-cron_expr");
  });
});
