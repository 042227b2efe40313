import { describe, expect, it } from "vitest";
import { fireEvent, render, screen } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { EventLogView, LogItem } from "./EventLog";
import type { JobLogView } from "../lib/useJobLog";

const log: JobLogView = { items: [], movements: [], totalCost: 0, executor: undefined, model: undefined, count: 0, lastId: 0, gaps: 0, dupes: 0, connected: true, ended: undefined };

// The log follows its end until the user scrolls up: with the wheel, and
// with the keyboard too (↑, Page Up, Home in the focused log), which kept
// following, each new event taking the reader back to the bottom.
describe("EventLogView", () => {
  for (const key of ["{ArrowUp}", "{PageUp}", "{Home}", "{Shift>} {/Shift}"]) {
    it(`stops following, and reading out rows, when the log is scrolled up with ${key}`, async () => {
      const user = userEvent.setup();
      render(<EventLogView log={log} />);
      const follow = screen.getByRole("checkbox", { name: "Follow" });
      expect(follow).toBeChecked();
      screen.getByTestId("event-log").focus();
      await user.keyboard("{ArrowDown}{End}");
      expect(follow).toBeChecked();
      expect(screen.getByTestId("event-log")).toHaveAttribute("aria-live", "polite");
      await user.keyboard(key);
      expect(follow).not.toBeChecked();
      // Scrolled back, the rows drawn as they come into view are old: the
      // log no longer reads them out as if they were new.
      expect(screen.getByTestId("event-log")).toHaveAttribute("aria-live", "off");
      await user.click(follow);
      expect(screen.getByTestId("event-log")).toHaveAttribute("aria-live", "polite");
    });
  }

  // A touch swipe (a phone, at 390 px) or a drag of the scrollbar sends no
  // wheel event and no key: the log kept following, and each new event took
  // the reader back to the bottom.
  it("stops following when the log is scrolled up by any means, not when it stays at the bottom", () => {
    render(<EventLogView log={log} />);
    const follow = screen.getByRole("checkbox", { name: "Follow" });
    const el = screen.getByTestId("event-log");
    let top = 800;
    let height = 1000;
    Object.defineProperty(el, "scrollTop", { configurable: true, get: () => top, set: (v: number) => (top = v) });
    Object.defineProperty(el, "scrollHeight", { configurable: true, get: () => height });
    Object.defineProperty(el, "clientHeight", { configurable: true, get: () => 200 });
    fireEvent.scroll(el);
    // Rows measured shorter than estimated: the browser pulls the view up
    // to the new bottom. Still at the bottom, it still follows.
    height = 900;
    top = 700;
    fireEvent.scroll(el);
    expect(follow).toBeChecked();
    top = 300;
    fireEvent.scroll(el);
    expect(follow).not.toBeChecked();
    expect(el).toHaveAttribute("aria-live", "off");
  });

  it("frames a result in green only when it is a success", () => {
    const items = [
      { kind: "result" as const, id: 1, status: "success", result: "Done." },
      { kind: "result" as const, id: 2, status: "aborted", result: "I cannot go on." },
    ];
    render(
      <>
        {items.map((it) => (
          <LogItem key={it.id} item={it} />
        ))}
      </>,
    );
    const shown = screen.getAllByTestId("event-item");
    expect(shown.map((e) => e.className.includes("emerald"))).toEqual([true, false]);
    expect(shown[1]?.className).toContain("border-red-300");
  });

  it("says connecting before the first event, reconnecting once one came", () => {
    const { rerender } = render(<EventLogView log={{ ...log, connected: false }} />);
    expect(screen.getByTestId("event-log-state")).toHaveTextContent("○ connecting…");
    rerender(<EventLogView log={{ ...log, connected: false, lastId: 3, count: 3 }} />);
    expect(screen.getByTestId("event-log-state")).toHaveTextContent("○ reconnecting…");
  });

  it("stops following when a row in the log takes the focus, not when the log itself does", () => {
    render(<EventLogView log={log} />);
    const follow = screen.getByRole("checkbox", { name: "Follow" });
    const el = screen.getByTestId("event-log");
    fireEvent.focusIn(el);
    expect(follow).toBeChecked();
    // The rows' box (jsdom draws no row: no layout), standing for a row.
    fireEvent.focusIn(el.firstElementChild!);
    expect(follow).not.toBeChecked();
  });
});

// A live session's log ends in the state "ended": its label said
// "ended: ended"; a job's says the state it ended in.
describe("EventLogView's state", () => {
  it.each([
    ["ended", "ended"],
    ["succeeded", "ended: succeeded"],
  ])("a log that ended in %s reads %s", (state, want) => {
    render(<EventLogView log={{ ...log, connected: false, ended: { state, last_seq: 3 } }} />);
    expect(screen.getByTestId("event-log-state").textContent).toBe(want);
  });
});
