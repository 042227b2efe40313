import { describe, expect, it, vi } from "vitest";
import { render, screen, waitFor } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { Route, Routes } from "react-router";
import NewTask from "./NewTask";
import { json, toRequest, Wrap } from "../test/helpers";
import type { UploadResult } from "../lib/upload";

// An upload (files sent with the task) is held until a test answers it.
const upload = vi.hoisted(() => ({ answer: (_: UploadResult) => {}, calls: 0 }));
vi.mock("../lib/upload", () => ({
  createTaskWithFiles: () => {
    upload.calls++;
    return new Promise<UploadResult>((r) => (upload.answer = r));
  },
}));

// A server with a model, two agent CLIs installed, that records the body of
// every POST /api/v1/tasks and answers with task 7.
function server(executorDefault: string) {
  const posted: Record<string, unknown>[] = [];
  const f = async (input: RequestInfo | URL, init?: RequestInit) => {
    const req = toRequest(input, init);
    const url = new URL(req.url);
    if (url.pathname === "/api/v1/server") return json({ version: "t", workers: [], queue: {}, executor_default: executorDefault, agents: ["codex", "claude-code"] });
    if (url.pathname === "/api/v1/pieces") return json({ pieces: [] });
    if (url.pathname === "/api/v1/tasks" && req.method === "POST") {
      posted.push(await req.json());
      return json({ task: { id: 7, title: "x", created_at: "", updated_at: "" }, job: {} }, 201);
    }
    return json({ error: "unexpected" }, 404);
  };
  return { fetch: f as typeof fetch, posted };
}

function renderForm(f: typeof fetch) {
  render(
    <Wrap fetch={f} path="/tasks/new">
      <Routes>
        <Route path="/tasks/new" element={<NewTask />} />
        <Route path="/tasks/:id" element={<p>detail</p>} />
      </Routes>
    </Wrap>,
  );
}

describe("NewTask executor", () => {
  const cases: { name: string; executorDefault: string; pick?: string; agent?: string; shown: string; sent: Record<string, unknown> }[] = [
    { name: "left alone it follows the server's default and sends none", executorDefault: "replay", shown: "replay", sent: {} },
    { name: "native is sent when picked", executorDefault: "replay", pick: "native", shown: "native", sent: { executor: "native" } },
    { name: "an agent CLI from the server's list", executorDefault: "native", pick: "agent-cli", agent: "codex", shown: "agent-cli", sent: { executor: "agent-cli", agent: "codex" } },
    { name: "replay on a model server", executorDefault: "native", pick: "replay", shown: "replay", sent: { executor: "replay" } },
  ];
  for (const c of cases) {
    it(c.name, async () => {
      const s = server(c.executorDefault);
      const user = userEvent.setup();
      renderForm(s.fetch);
      await user.type(screen.getByLabelText("Title"), "Do it");
      if (c.pick) await user.selectOptions(screen.getByTestId("new-task-executor"), c.pick);
      await waitFor(() => expect(screen.getByTestId("new-task-executor")).toHaveValue(c.shown));
      if (c.agent) {
        await waitFor(() => expect(screen.getByRole("option", { name: c.agent })).toBeInTheDocument());
        await user.selectOptions(screen.getByTestId("new-task-agent"), c.agent);
      }
      await user.click(screen.getByTestId("new-task-submit"));
      await waitFor(() => expect(s.posted).toHaveLength(1));
      const { title, ...rest } = s.posted[0] as { title: string };
      expect(title).toBe("Do it");
      expect(rest).toEqual(c.sent);
    });
  }
});

describe("NewTask errors", () => {
  it("shows a scenario the server refuses under the scenario box, once", async () => {
    const msg = "invalid scripted scenario payload.replay: 1:1: expected a scripted scenario object, got a number";
    const f = (async (input: RequestInfo | URL, init?: RequestInit) => {
      const req = toRequest(input, init);
      const url = new URL(req.url);
      if (url.pathname === "/api/v1/server") return json({ version: "t", workers: [], queue: {}, executor_default: "replay" });
      if (url.pathname === "/api/v1/pieces") return json({ pieces: [] });
      if (url.pathname === "/api/v1/tasks" && req.method === "POST") return json({ error: msg, field: "payload.replay" }, 422);
      return json({ error: "unexpected" }, 404);
    }) as typeof fetch;
    const user = userEvent.setup();
    renderForm(f);
    await user.type(screen.getByLabelText("Title"), "Do it");
    await waitFor(() => expect(screen.getByTestId("new-task-executor")).toHaveValue("replay"));
    await user.type(screen.getByLabelText("Replay scenario"), "5");
    await user.click(screen.getByTestId("new-task-submit"));
    await waitFor(() => expect(screen.getByRole("alert")).toHaveTextContent(msg));
    expect(screen.getAllByRole("alert")).toHaveLength(1);
    expect(screen.getByRole("alert")).toHaveAttribute("id", "err-payload");
  });
});

// With the keyboard: a refused task puts the focus on the field at fault
// (the error may be far from the keyboard),
// and removing a file to upload puts it on the next file's Remove (its
// button gone, the focus went to <body>).
describe("NewTask with the keyboard", () => {
  it("focuses the field at fault when the task is refused", async () => {
    const f = (async (input: RequestInfo | URL, init?: RequestInit) => {
      const req = toRequest(input, init);
      const url = new URL(req.url);
      if (url.pathname === "/api/v1/server") return json({ version: "t", workers: [], queue: {}, executor_default: "native" });
      if (url.pathname === "/api/v1/pieces") return json({ pieces: [{ name: "general", source: "builtin" }] });
      if (url.pathname === "/api/v1/tasks" && req.method === "POST") return json({ error: 'piece: unknown piece "nope"', field: "piece" }, 422);
      return json({ error: "unexpected" }, 404);
    }) as typeof fetch;
    const user = userEvent.setup();
    renderForm(f);
    screen.getByTestId("new-task-submit").focus();
    await user.keyboard("{Enter}");
    // Under the field labelled Title, without the API's name of it
    // ("title: required: …" before).
    expect(await screen.findByRole("alert")).toHaveTextContent(/^Required: a short description of the work\.$/);
    expect(document.activeElement).toBe(screen.getByLabelText("Title"));
    await user.keyboard("Do it");
    screen.getByTestId("new-task-submit").focus();
    await user.keyboard("{Enter}");
    await waitFor(() => expect(screen.getByRole("alert")).toHaveTextContent(/^unknown piece "nope"$/));
    expect(document.activeElement).toBe(screen.getByTestId("new-task-piece"));
  });

  // While it sends, Submit keeps the focus (disabled, it dropped it on
  // <body> until the answer came) and a second press sends nothing.
  it("keeps the focus on Submit while sending, and sends once", async () => {
    let posts = 0;
    let answer: (r: Response) => void = () => undefined;
    const f = (async (input: RequestInfo | URL, init?: RequestInit) => {
      const req = toRequest(input, init);
      const url = new URL(req.url);
      if (url.pathname === "/api/v1/server") return json({ version: "t", workers: [], queue: {}, executor_default: "native" });
      if (url.pathname === "/api/v1/pieces") return json({ pieces: [] });
      if (url.pathname === "/api/v1/tasks" && req.method === "POST") {
        posts++;
        return new Promise<Response>((r) => (answer = r));
      }
      return json({ error: "unexpected" }, 404);
    }) as typeof fetch;
    const user = userEvent.setup();
    renderForm(f);
    await user.type(screen.getByLabelText("Title"), "Do it");
    const submit = screen.getByTestId("new-task-submit");
    submit.focus();
    await user.keyboard("{Enter}");
    await waitFor(() => expect(posts).toBe(1));
    expect(submit).toHaveTextContent("Submitting…");
    expect(submit).toHaveAttribute("aria-disabled", "true");
    expect(submit).not.toBeDisabled();
    expect(document.activeElement).toBe(submit);
    await user.keyboard("{Enter}");
    await user.click(submit);
    expect(posts).toBe(1);
    answer(json({ error: "the store is read-only" }, 503));
    await waitFor(() => expect(submit).toHaveTextContent("Submit"));
    expect(submit).not.toHaveAttribute("aria-disabled");
    expect(document.activeElement).toBe(submit);
  });

  it("focuses the next file's Remove when a file is removed", async () => {
    const user = userEvent.setup();
    renderForm(server("native").fetch);
    await user.upload(screen.getByTestId("new-task-files"), [new File(["a"], "a.txt"), new File(["b"], "b.txt")]);
    screen.getByRole("button", { name: "Remove a.txt" }).focus();
    await user.keyboard("{Enter}");
    expect(screen.queryByRole("button", { name: "Remove a.txt" })).toBeNull();
    expect(document.activeElement).toBe(screen.getByRole("button", { name: "Remove b.txt" }));
    await user.keyboard("{Enter}");
    expect(document.activeElement).toBe(screen.getByTestId("new-task-files"));
  });
});

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
    renderForm(f);
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
