import { describe, expect, it } from "vitest";
import { render, screen } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import Schedules from "./Schedules";
import { json, toRequest, Wrap } from "../test/helpers";

describe("Schedules", () => {
  // A new server's page said "No schedules.": not what a schedule is nor
  // how to make one (and said it while the list was still loading).
  it("says what a schedule is and how to make the first", async () => {
    let answer: (r: Response) => void = () => undefined;
    const held = new Promise<Response>((r) => (answer = r));
    render(
      <Wrap fetch={(() => held) as typeof fetch} path="/schedules">
        <Schedules />
      </Wrap>,
    );
    expect(screen.getByTestId("schedule-list-empty")).toHaveTextContent("Loading schedules…");
    answer(json({ schedules: [] }));
    expect(await screen.findByText(/^No schedules yet\./)).toHaveTextContent("submits a task at the times of a cron expression");
    expect(screen.getByTestId("schedule-list-empty")).toHaveTextContent("New schedule makes the first.");
  });

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
    // The field at fault has the focus (it stayed on Save, below).
    expect(document.activeElement).toBe(screen.getByLabelText("Cron expression"));
  });
});

// The form opens above the list and closes on Save, Close or Delete: with
// the keyboard, Edit left the focus on its row (the form behind it, out of
// Tab's way) and closing it left the focus on <body>.
describe("Schedules with the keyboard", () => {
  it("moves the focus into the form when it opens and back to its opener when it closes", async () => {
    const t0 = "2026-11-26T12:00:00Z";
    let schedules = [{ id: 1, name: "weekly", cron_expr: "0 9 * * 1", title: "Report", enabled: true, next_run_at: t0, created_at: t0, updated_at: t0 }];
    const f = async (input: RequestInfo | URL, init?: RequestInit) => {
      const req = toRequest(input, init);
      const url = new URL(req.url);
      if (url.pathname === "/api/v1/schedules/1" && req.method === "DELETE") {
        schedules = [];
        return new Response(null, { status: 204 });
      }
      if (url.pathname === "/api/v1/schedules" && req.method === "POST") {
        const body = (await req.json()) as { name: string; title: string };
        const s = { ...body, id: 2, cron_expr: "0 9 * * 1", enabled: true, next_run_at: t0, created_at: t0, updated_at: t0 };
        schedules = [...schedules, s];
        return json({ schedule: s }, 201);
      }
      if (url.pathname === "/api/v1/schedules") return json({ schedules });
      return json({ pieces: [] });
    };
    render(
      <Wrap fetch={f as typeof fetch} path="/schedules">
        <Schedules />
      </Wrap>,
    );
    const user = userEvent.setup();
    const edit = await screen.findByRole("button", { name: "Edit weekly" });
    // The page opening moves no focus (the first Tab goes to the skip link).
    expect(document.activeElement).toBe(document.body);
    edit.focus();
    await user.keyboard("{Enter}");
    expect(document.activeElement).toBe(screen.getByLabelText("Name"));
    expect(screen.getByLabelText("Name")).toHaveValue("weekly");

    screen.getByRole("button", { name: "Close" }).focus();
    await user.keyboard("{Enter}");
    expect(screen.queryByTestId("schedule-save")).toBeNull();
    expect(document.activeElement).toBe(edit);

    await user.keyboard("{Enter}");
    screen.getByTestId("schedule-delete").focus();
    await user.keyboard("{Enter}");
    expect(screen.getByTestId("schedule-delete")).toHaveTextContent("Really delete");
    await user.keyboard("{Enter}");
    await screen.findByText(/^No schedules yet\./);
    expect(document.activeElement).toBe(screen.getByTestId("new-schedule-button"));

    await user.keyboard("{Enter}");
    expect(document.activeElement).toBe(screen.getByLabelText("Name"));
    await user.keyboard("daily");
    screen.getByLabelText("Task title").focus();
    await user.keyboard("Digest{Enter}");
    expect(await screen.findByRole("button", { name: "Edit daily" })).toBeInTheDocument();
    expect(screen.queryByTestId("schedule-save")).toBeNull();
    expect(document.activeElement).toBe(screen.getByTestId("new-schedule-button"));
  });
});
