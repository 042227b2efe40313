import { describe, expect, it, vi } from "vitest";
import { render, screen, waitFor } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { Route, Routes } from "react-router";
import NewTask from "./NewTask";
import { json, toRequest, Wrap } from "../test/helpers";
import type { UploadResult } from "../lib/upload";

// The upload is held until the test answers it.
const upload = vi.hoisted(() => ({ answer: (_: UploadResult) => {}, calls: 0 }));
vi.mock("../lib/upload", () => ({
  createTaskWithFiles: () => {
    upload.calls++;
    return new Promise<UploadResult>((r) => (upload.answer = r));
  },
}));

// Ctrl+Enter sends the form from any control in it, a file's Remove
// included. While the files upload, that Remove keeps the focus (disabled,
// it dropped it on <body> until the upload ended) and does nothing.
describe("NewTask while files upload", () => {
  it("keeps the focus on a file's Remove, which removes nothing", async () => {
    const f = (async (input: RequestInfo | URL, init?: RequestInit) => {
      const url = new URL(toRequest(input, init).url);
      if (url.pathname === "/api/v1/server") return json({ version: "t", workers: [], queue: {}, executor_default: "native" });
      if (url.pathname === "/api/v1/pieces") return json({ pieces: [] });
      return json({ error: "unexpected" }, 404);
    }) as typeof fetch;
    const user = userEvent.setup();
    render(
      <Wrap fetch={f} path="/tasks/new">
        <Routes>
          <Route path="/tasks/new" element={<NewTask />} />
          <Route path="/tasks/:id" element={<p>detail</p>} />
        </Routes>
      </Wrap>,
    );
    await user.type(screen.getByLabelText("Title"), "Do it");
    await user.upload(screen.getByTestId("new-task-files"), [new File(["a"], "a.txt"), new File(["b"], "b.txt")]);
    const remove = screen.getByRole("button", { name: "Remove a.txt" });
    remove.focus();
    await user.keyboard("{Control>}{Enter}{/Control}");
    await waitFor(() => expect(upload.calls).toBe(1));
    expect(remove).toHaveAttribute("aria-disabled", "true");
    expect(remove).not.toBeDisabled();
    expect(document.activeElement).toBe(remove);
    await user.keyboard("{Enter}");
    await user.click(remove);
    expect(screen.getByRole("button", { name: "Remove a.txt" })).toBe(remove);
    expect(document.activeElement).toBe(remove);
    upload.answer({ status: 503, body: { error: "the store is read-only" } });
    await waitFor(() => expect(remove).not.toHaveAttribute("aria-disabled"));
    expect(screen.getByRole("alert")).toHaveTextContent("read-only");
  });
});
