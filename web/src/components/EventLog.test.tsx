import { describe, expect, it } from "vitest";
import { render, screen } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { EventLogView } from "./EventLog";
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
});
