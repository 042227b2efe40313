import { describe, expect, it } from "vitest";
import { act, render, screen, waitFor, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { focusManager } from "@tanstack/react-query";
import { Route, Routes } from "react-router";
import TaskDetail from "./TaskDetail";
import { json, toRequest, Wrap } from "../test/helpers";

// task5 answers GET /api/v1/tasks/5: task 5 with its one job 9 in state.
function task5(state: string, comments: unknown[] = []) {
  return json({
    task: { id: 5, title: "x", created_at: t0, updated_at: t0, job_id: 9, job_state: state },
    jobs: [{ id: 9, task_id: 5, priority: 0, payload: {}, state, attempt: 1, max_attempts: 1, scheduled_at: t0, last_seq: 1, created_at: t0, updated_at: t0 }],
    comments,
  });
}

// renderTask5 shows task 5's page, its API answered by f.
function renderTask5(f: typeof fetch) {
  render(
    <Wrap fetch={f} path="/tasks/5">
      <Routes>
        <Route path="/tasks/:id" element={<TaskDetail />} />
      </Routes>
    </Wrap>,
  );
}

function sse(frames: string[]): Response {
  const enc = new TextEncoder();
  const left = frames.slice();
  return new Response(
    new ReadableStream({
      pull(ctl) {
        const f = left.shift();
        if (f === undefined) ctl.close();
        else ctl.enqueue(enc.encode(f));
      },
    }),
    { status: 200, headers: { "Content-Type": "text/event-stream" } },
  );
}

function frame(seq: number, type: string, data: Record<string, unknown>): string {
  return `id: ${seq}\nevent: ${type}\ndata: ${JSON.stringify({ job_id: 9, seq, attempt: 1, type, data, created_at: "2026-11-26T12:00:00Z" })}\n\n`;
}

const t0 = "2026-11-26T12:00:00Z";

// fakeServer answers the routes the detail page reads for task 5 whose job 9
// is waiting for an answer, and records the mutations.
function fakeServer(posts: string[]) {
  return (async (input: RequestInfo | URL, init?: RequestInit) => {
    const req = toRequest(input, init);
    const url = new URL(req.url);
    const key = `${req.method} ${url.pathname}`;
    switch (key) {
      case "GET /api/v1/tasks/5":
        return json({
          task: { id: 5, title: "Paint the fence", created_at: t0, updated_at: t0, job_id: 9, job_state: "waiting_human" },
          jobs: [{ id: 9, task_id: 5, priority: 0, payload: {}, state: "waiting_human", attempt: 1, max_attempts: 3, scheduled_at: t0, last_seq: 4, created_at: t0, updated_at: t0 }],
          comments: [{ id: 1, task_id: 5, author_kind: "agent", body: "Which colour?", created_at: t0 }],
        });
      case "GET /api/v1/jobs/9/events":
        return sse([
          "retry: 1\n\n",
          frame(1, "status", { state: "running", attempt: 1 }),
          frame(2, "protocol", { type: "ready", provider: "replay", model: "maestro-replay-v1", executor_type: "replay" }) +
            frame(3, "run_event", { kind: "movement_started", data: { movement: "execute", number: 1 } }),
          frame(4, "protocol", { type: "response_end", usage: { input_tokens: 3, output_tokens: 2, total_cost_usd: 0.5 } }),
          'event: end\ndata: {"state":"succeeded","last_seq":4}\n\n',
        ]);
      case "GET /api/v1/tasks/5/deliverables":
        return json({ files: [] });
      case "GET /api/v1/jobs":
        return json({ jobs: [{ id: 12, task_id: 6, parent_job_id: 9, priority: 0, payload: {}, state: "queued", attempt: 0, max_attempts: 3, scheduled_at: t0, last_seq: 1, created_at: t0, updated_at: t0 }] });
      case "GET /api/v1/server":
        return json({ executor_default: "native" });
      case "POST /api/v1/tasks/5/comments":
        posts.push(`${key} ${await req.text()}`);
        return json({ comment: { id: 2, task_id: 5, author_kind: "user", body: "Blue.", created_at: t0 }, resumed_jobs: [] }, 201);
      case "POST /api/v1/jobs/9/cancel":
        posts.push(key);
        return json({ job: {} });
    }
    return json({ error: `no route ${key}` }, 404);
  }) as typeof fetch;
}

describe("TaskDetail", () => {
  // A task the server does not have said only "get task 5: not found"
  // (a bad id "Bad task id."): no title, no way back to the list.
  it("says the server has no such task, with a link to the list", async () => {
    renderTask5((async () => json({ error: { code: "not_found", message: "get task 5: not found" } }, 404)) as typeof fetch);
    expect(await screen.findByTestId("task-missing")).toHaveTextContent("This server has no task 5: the link is wrong, or it is another server's.");
    expect(screen.getByRole("heading", { name: "Task 5" })).toBeInTheDocument();
    expect(screen.getByRole("link", { name: "All tasks" })).toHaveAttribute("href", "/");
  });

  it("says a bad task id is not one, with a link to the list", async () => {
    render(
      <Wrap fetch={(async () => json({})) as typeof fetch} path="/tasks/abc">
        <Routes>
          <Route path="/tasks/:id" element={<TaskDetail />} />
        </Routes>
      </Wrap>,
    );
    expect(await screen.findByTestId("task-missing")).toHaveTextContent("abc is not a task id");
    expect(screen.getByRole("link", { name: "All tasks" })).toHaveAttribute("href", "/");
  });

  it("shows the live log's counters, the executor, the question and cost; answers and cancels", async () => {
    const posts: string[] = [];
    renderTask5(fakeServer(posts));
    expect(await screen.findByTestId("task-title")).toHaveTextContent("Paint the fence");
    expect(screen.getByTestId("task-status")).toHaveAttribute("data-status", "waiting_human");
    const log = screen.getByTestId("event-log");
    await waitFor(() => expect(log).toHaveAttribute("data-count", "4"));
    expect(log).toHaveAttribute("data-last-id", "4");
    expect(log).toHaveAttribute("data-gaps", "0");
    expect(log).toHaveAttribute("data-dupes", "0");
    await waitFor(() => expect(log).toHaveAttribute("data-connected", "false"));
    expect(screen.getByTestId("executor-badge")).toHaveTextContent("REPLAY");
    expect(screen.getByTestId("task-cost")).toHaveTextContent("$0.50");
    expect(screen.getAllByTestId("movement")).toHaveLength(1);
    expect(await screen.findByTestId("subtask-row")).toHaveTextContent("task #6");

    // The tab says which task and that it waits.
    expect(document.title).toBe("#5 Paint the fence (waiting for you) · Maestro");
    const panel = screen.getByTestId("question-panel");
    expect(within(panel).getByTestId("question-text")).toHaveTextContent("Which colour?");
    await userEvent.type(within(panel).getByTestId("answer-input"), "Blue.");
    await userEvent.click(within(panel).getByTestId("answer-submit"));
    await waitFor(() => expect(posts).toContain('POST /api/v1/tasks/5/comments {"body":"Blue."}'));

    await userEvent.click(screen.getByTestId("cancel-task"));
    expect(screen.getByTestId("confirm-dialog")).toHaveAttribute("open");
    await userEvent.click(screen.getByTestId("confirm-cancel"));
    expect(posts).not.toContain("POST /api/v1/jobs/9/cancel");
    await userEvent.click(screen.getByTestId("cancel-task"));
    await userEvent.click(screen.getByTestId("confirm-ok"));
    await waitFor(() => expect(posts).toContain("POST /api/v1/jobs/9/cancel"));
  });

  it("keeps the line breaks of a failed job's error", async () => {
    const error = 'job payload field "replay": invalid scripted scenario (2 problems):\n  1:1: id: required field is missing\n  1:1: frames: required field is missing';
    const f = (async (input: RequestInfo | URL, init?: RequestInit) => {
      const url = new URL(toRequest(input, init).url);
      if (url.pathname === "/api/v1/tasks/5")
        return json({
          task: { id: 5, title: "x", created_at: t0, updated_at: t0, job_id: 9, job_state: "failed" },
          jobs: [{ id: 9, task_id: 5, priority: 0, payload: {}, state: "failed", attempt: 1, max_attempts: 3, scheduled_at: t0, last_seq: 3, created_at: t0, updated_at: t0, error }],
          comments: [],
        });
      if (url.pathname === "/api/v1/jobs/9/events") return sse(['event: end\ndata: {"state":"failed","last_seq":3}\n\n']);
      if (url.pathname === "/api/v1/tasks/5/deliverables") return json({ files: [] });
      if (url.pathname === "/api/v1/jobs") return json({ jobs: [] });
      return json({});
    }) as typeof fetch;
    renderTask5(f);
    const shown = await screen.findByTestId("job-error");
    expect(shown.textContent).toBe(error);
    expect(shown).toHaveClass("whitespace-pre-wrap");
  });

  it("keeps the sub-task tree shown while a new job's sub-tasks load", async () => {
    // The task's list of jobs changes (here a job appears after a retry, as
    // the last review saw it): the sub-task query's key changes with it,
    // and the tree vanished until the new fetch came.
    let jobs = [9];
    let release: () => void = () => undefined;
    let held = false;
    const job = (id: number, state: string) => ({ id, task_id: 5, priority: 0, payload: {}, state, attempt: 1, max_attempts: 1, scheduled_at: t0, last_seq: 3, created_at: t0, updated_at: t0 });
    const f = (async (input: RequestInfo | URL, init?: RequestInit) => {
      const req = toRequest(input, init);
      const url = new URL(req.url);
      if (url.pathname === "/api/v1/tasks/5")
        return json({
          task: { id: 5, title: "x", created_at: t0, updated_at: t0, job_id: jobs[jobs.length - 1], job_state: "failed" },
          jobs: jobs.map((id) => job(id, id === 9 ? "failed" : "queued")),
          comments: [],
        });
      if (url.pathname.match(/^\/api\/v1\/jobs\/\d+\/events$/)) return sse(['event: end\ndata: {"state":"failed","last_seq":3}\n\n']);
      if (url.pathname === "/api/v1/tasks/5/deliverables") return json({ files: [] });
      if (url.pathname === "/api/v1/jobs") {
        if (jobs.length > 1) {
          held = true;
          await new Promise<void>((r) => (release = r));
        }
        return json({ jobs: [{ ...job(12, "succeeded"), task_id: 6, parent_job_id: 9 }] });
      }
      if (req.method === "POST" && url.pathname === "/api/v1/jobs/9/retry") {
        jobs = [9, 10];
        return json({ job: job(10, "queued") });
      }
      return json({});
    }) as typeof fetch;
    renderTask5(f);
    expect(await screen.findByTestId("subtask-row")).toHaveTextContent("task #6");
    await userEvent.click(screen.getByTestId("retry-task"));
    await userEvent.click(screen.getByTestId("confirm-ok"));
    await waitFor(() => expect(held).toBe(true));
    expect(screen.queryByTestId("subtask-row")).toHaveTextContent("task #6");
    release();
    await waitFor(() => expect(screen.getByTestId("task-status")).toHaveAttribute("data-status", "queued"));
    expect(screen.getByTestId("subtask-row")).toHaveTextContent("task #6");
  });

  it("keeps the focus on the task's action when cancelling with the keyboard makes it Retry", async () => {
    let state = "running";
    const f = (async (input: RequestInfo | URL, init?: RequestInit) => {
      const req = toRequest(input, init);
      const url = new URL(req.url);
      if (url.pathname === "/api/v1/tasks/5")
        return task5(state);
      if (url.pathname === "/api/v1/jobs/9/events") return sse(["retry: 1\n\n"]);
      if (url.pathname === "/api/v1/tasks/5/deliverables") return json({ files: [] });
      if (url.pathname === "/api/v1/jobs") return json({ jobs: [] });
      if (req.method === "POST" && url.pathname === "/api/v1/jobs/9/cancel") {
        state = "cancelled";
        return json({ job: {} });
      }
      return json({});
    }) as typeof fetch;
    renderTask5(f);
    const user = userEvent.setup();
    (await screen.findByTestId("cancel-task")).focus();
    await user.keyboard("{Enter}");
    expect(document.activeElement).toBe(screen.getByTestId("confirm-cancel"));
    await user.tab();
    expect(document.activeElement).toBe(screen.getByTestId("confirm-ok"));
    await user.keyboard("{Enter}");
    const retry = await screen.findByTestId("retry-task");
    // Not <body>: the next Tab goes on from the task's header.
    expect(document.activeElement).toBe(retry);
  });

  it("gives the focus to the log once the question is answered with the keyboard", async () => {
    let state = "waiting_human";
    const f = (async (input: RequestInfo | URL, init?: RequestInit) => {
      const req = toRequest(input, init);
      const url = new URL(req.url);
      if (url.pathname === "/api/v1/tasks/5")
        return task5(state, [{ id: 1, task_id: 5, author_kind: "agent", body: "Which colour?", created_at: t0 }]);
      if (url.pathname === "/api/v1/jobs/9/events") return sse(["retry: 1\n\n"]);
      if (url.pathname === "/api/v1/tasks/5/deliverables") return json({ files: [] });
      if (url.pathname === "/api/v1/jobs") return json({ jobs: [] });
      if (req.method === "POST" && url.pathname === "/api/v1/tasks/5/comments") {
        state = "queued";
        return json({ comment: { id: 2, task_id: 5, author_kind: "user", body: "Blue.", created_at: t0 }, resumed_jobs: [] }, 201);
      }
      return json({});
    }) as typeof fetch;
    renderTask5(f);
    const user = userEvent.setup();
    await user.click(await screen.findByTestId("answer-input"));
    await user.keyboard("Blue.");
    screen.getByTestId("answer-submit").focus();
    await user.keyboard("{Enter}");
    await waitFor(() => expect(screen.queryByTestId("question-panel")).toBeNull());
    // Not <body>: the next Tab goes on from the log, not from the top of the window.
    expect(document.activeElement).toBe(screen.getByTestId("event-log"));
  });

  it("keeps the task, its log and the answer being written while the server does not answer", async () => {
    // The server stopped mid-task: the task's next poll failed and the whole
    // page became "Task 5 / The server does not answer… / All tasks", the
    // title, log and question gone, and the answer and comment being
    // written lost with them (still lost once the server was back).
    let down = false;
    const up = fakeServer([]);
    const f = (async (input: RequestInfo | URL, init?: RequestInit) => {
      if (down) throw new TypeError("Failed to fetch");
      return up(input, init);
    }) as typeof fetch;
    renderTask5(f);
    const user = userEvent.setup();
    await user.type(await screen.findByTestId("answer-input"), "Blue, I think");
    await user.type(screen.getByLabelText("Add a comment"), "a note");
    down = true;
    // The page polls the task; a focus of the window asks at once.
    act(() => {
      focusManager.setFocused(false);
      focusManager.setFocused(true);
    });
    expect(await screen.findByTestId("task-unreachable")).toHaveTextContent("The server does not answer: is maestro serve running?");
    expect(screen.queryByTestId("task-missing")).toBeNull();
    expect(screen.getByTestId("task-title")).toHaveTextContent("Paint the fence");
    expect(screen.getByTestId("event-log")).toBeInTheDocument();
    expect(screen.getByTestId("answer-input")).toHaveValue("Blue, I think");
    expect(screen.getByLabelText("Add a comment")).toHaveValue("a note");
    down = false;
    act(() => {
      focusManager.setFocused(false);
      focusManager.setFocused(true);
    });
    await waitFor(() => expect(screen.queryByTestId("task-unreachable")).toBeNull());
    expect(screen.getByTestId("answer-input")).toHaveValue("Blue, I think");
    act(() => focusManager.setFocused(undefined));
  });

  it("sends a comment once when Comment is pressed twice, and keeps the focus on it", async () => {
    // Comment had no busy state: a double click (or Enter twice) while the
    // first was on its way posted the comment twice.
    const posts: string[] = [];
    let release = () => {};
    const held = new Promise<void>((r) => (release = r));
    const f = (async (input: RequestInfo | URL, init?: RequestInit) => {
      const req = toRequest(input, init);
      const url = new URL(req.url);
      if (url.pathname === "/api/v1/tasks/5") return task5("running");
      if (url.pathname === "/api/v1/jobs/9/events") return sse(["retry: 1\n\n"]);
      if (url.pathname === "/api/v1/tasks/5/deliverables") return json({ files: [] });
      if (url.pathname === "/api/v1/jobs") return json({ jobs: [] });
      if (req.method === "POST" && url.pathname === "/api/v1/tasks/5/comments") {
        posts.push(await req.text());
        await held;
        return json({ comment: { id: 2, task_id: 5, author_kind: "user", body: "Looks good.", created_at: t0 }, resumed_jobs: [] }, 201);
      }
      return json({});
    }) as typeof fetch;
    renderTask5(f);
    const user = userEvent.setup();
    await user.type(await screen.findByLabelText("Add a comment"), "Looks good.");
    const send = screen.getByRole("button", { name: "Comment" });
    send.focus();
    await user.keyboard("{Enter}");
    await waitFor(() => expect(posts).toHaveLength(1));
    await user.keyboard("{Enter}");
    await user.click(send);
    expect(posts).toHaveLength(1);
    expect(document.activeElement).toBe(send);
    release();
    await waitFor(() => expect(screen.getByLabelText("Add a comment")).toHaveValue(""));
    expect(posts).toHaveLength(1);
  });
});
