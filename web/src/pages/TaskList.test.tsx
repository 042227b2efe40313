import { describe, expect, it } from "vitest";
import { render, screen, waitFor, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { Route, Routes, useLocation } from "react-router";
import { TaskList, TaskTable } from "./TaskList";
import type { Job, Task } from "../api/types";
import { json, toRequest, Wrap } from "../test/helpers";

const now = Date.parse("2026-11-26T12:00:00Z");

function task(id: number, state: Task["job_state"], extra: Partial<Task> = {}): Task {
  return {
    id,
    title: `task ${id}`,
    created_at: "2026-11-26T11:00:00Z",
    updated_at: "2026-11-26T11:59:00Z",
    job_id: id + 100,
    job_state: state,
    ...extra,
  };
}

function job(id: number, payload: Record<string, unknown> = {}, extra: Partial<Job> = {}): Job {
  return {
    id,
    priority: 0,
    payload,
    state: "running",
    attempt: 1,
    max_attempts: 3,
    scheduled_at: "2026-11-26T11:00:00Z",
    last_seq: 3,
    created_at: "2026-11-26T11:00:00Z",
    updated_at: "2026-11-26T11:00:00Z",
    ...extra,
  };
}

describe("TaskTable", () => {
  const cases: {
    name: string;
    task: Task;
    job?: Job;
    executorDefault?: string;
    status: string;
    badge: RegExp;
    executor: RegExp;
    extra?: RegExp;
  }[] = [
    {
      name: "a replay server badges every job REPLAY",
      task: task(1, "succeeded", { job_piece: "general" }),
      job: job(101, {}, { attempted_at: "2026-11-26T11:00:00Z", finished_at: "2026-11-26T11:01:05Z" }),
      executorDefault: "replay",
      status: "succeeded",
      badge: /^succeeded$/,
      executor: /REPLAY/,
      extra: /1m 5s/,
    },
    {
      name: "a replay payload on a model server is REPLAY",
      task: task(2, "running"),
      job: job(102, { replay: "id: x" }),
      executorDefault: "native",
      status: "running",
      badge: /^running$/,
      executor: /REPLAY/,
    },
    {
      name: "waiting for the user says so",
      task: task(3, "waiting_human"),
      job: job(103),
      executorDefault: "native",
      status: "waiting_human",
      badge: /waiting for you/,
      executor: /^native$/,
    },
    {
      name: "waiting for subtasks says so",
      task: task(4, "waiting_subtasks", { piece: "review" }),
      executorDefault: "native",
      status: "waiting_subtasks",
      badge: /waiting for subtasks/,
      executor: /^native$/,
      extra: /review/,
    },
  ];

  cases.push(
    {
      name: "the task's own columns: model, cost and duration of its latest job",
      task: task(5, "succeeded", {
        job_executor: "live",
        job_model: "anthropic/claude-x",
        job_cost_usd: 0.1234,
        job_attempted_at: "2026-11-26T11:00:00Z",
        job_finished_at: "2026-11-26T11:02:03Z",
      }),
      executorDefault: "replay",
      status: "succeeded",
      badge: /^succeeded$/,
      executor: /^native$/,
      extra: /anthropic\/claude-x/,
    },
    {
      name: "a job that ran on an agent CLI names it",
      task: task(6, "running", { job_executor: "replay", job_model: "replay/demo", job_agent: "codex" }),
      executorDefault: "native",
      status: "running",
      badge: /^running$/,
      executor: /agent CLI/,
      extra: /^codex$/,
    },
    {
      name: "a queued job asking for replay is REPLAY before it starts",
      task: task(7, "queued"),
      job: job(107, { executor: "replay" }),
      executorDefault: "native",
      status: "queued",
      badge: /^queued$/,
      executor: /REPLAY/,
    },
  );

  it("shows cost and duration from the task", () => {
    render(
      <Wrap fetch={fetch}>
        <TaskTable
          tasks={[task(8, "succeeded", { job_executor: "live", job_cost_usd: 0.1234, job_attempted_at: "2026-11-26T11:00:00Z", job_finished_at: "2026-11-26T11:02:03Z" })]}
          jobs={undefined}
          server={undefined}
          now={now}
        />
      </Wrap>,
    );
    expect(screen.getByTestId("task-row-cost").textContent).toBe("$0.12");
    expect(screen.getByText("2m 3s")).toBeInTheDocument();
  });

  // The title and the model are cut to the row's width: each can be read
  // whole in its tooltip (the model's said only "model").
  it("gives a cut title and model their whole text as a tooltip", () => {
    const title = "Investigate why the nightly build fails on the arm64 runners since the toolchain upgrade";
    const model = "openrouter/anthropic/claude-sonnet-4-5-20250929-thinking";
    render(
      <Wrap fetch={fetch}>
        <TaskTable tasks={[task(9, "running", { title, job_executor: "live", job_model: model })]} jobs={undefined} server={undefined} now={now} />
      </Wrap>,
    );
    const row = screen.getByTestId("task-row");
    expect(within(row).getByRole("link")).toHaveAttribute("title", title);
    expect(within(row).getByTestId("task-model")).toHaveAttribute("title", `model: ${model}`);
  });

  for (const c of cases) {
    it(c.name, () => {
      const jobs = new Map(c.job ? [[c.job.id, c.job]] : []);
      render(
        <Wrap fetch={fetch}>
          <TaskTable tasks={[c.task]} jobs={jobs} server={{ version: "test", workers: [], queue: {}, executor_default: c.executorDefault }} now={now} />
        </Wrap>,
      );
      const row = screen.getByTestId("task-row");
      expect(row).toHaveAttribute("data-task-id", String(c.task.id));
      expect(row).toHaveAttribute("data-job-id", String(c.task.job_id));
      expect(row).toHaveAttribute("data-status", c.status);
      expect(within(row).getByRole("link")).toHaveAttribute("href", `/tasks/${c.task.id}`);
      expect(within(row).getByText(c.badge)).toBeInTheDocument();
      expect(within(row).getByTestId("executor-badge").textContent).toMatch(c.executor);
      if (c.extra) expect(within(row).getByText(c.extra)).toBeInTheDocument();
    });
  }

  it("lists many rows in order with one list", () => {
    const tasks = Array.from({ length: 50 }, (_, i) => task(50 - i, "queued"));
    render(
      <Wrap fetch={fetch}>
        <TaskTable tasks={tasks} jobs={undefined} server={undefined} now={now} />
      </Wrap>,
    );
    const rows = screen.getAllByTestId("task-row");
    expect(rows).toHaveLength(50);
    expect(rows[0]).toHaveAttribute("data-task-id", "50");
    expect(rows[49]).toHaveAttribute("data-task-id", "1");
    expect(screen.getByTestId("task-list")).toBeInTheDocument();
  });
});

// renderList shows the task list over f, at path.
function renderList(f: typeof fetch, path?: string) {
  return render(
    <Wrap fetch={f} path={path}>
      <TaskList />
    </Wrap>,
  );
}

describe("TaskList", () => {
  // A server of 120 tasks, each listed page answering the filter it was
  // asked for, that records the query of every GET /api/v1/tasks.
  function server() {
    const all = Array.from({ length: 120 }, (_, i) => task(120 - i, i % 2 ? "failed" : "queued", { title: i === 5 ? "Fix login" : `task ${120 - i}` }));
    const asked: URLSearchParams[] = [];
    const jobsAsked: URLSearchParams[] = [];
    const f = async (input: RequestInfo | URL, init?: RequestInit) => {
      const url = new URL(toRequest(input, init).url);
      if (url.pathname === "/api/v1/server") return json({ version: "test", workers: [], queue: {} });
      if (url.pathname === "/api/v1/jobs") {
        jobsAsked.push(url.searchParams);
        return json({ jobs: [] });
      }
      asked.push(url.searchParams);
      const p = url.searchParams;
      const before = Number(p.get("before") ?? Infinity);
      const q = (p.get("q") ?? "").toLowerCase();
      const states = p.get("state")?.split(",");
      const hit = all.filter((t) => t.id < before && (!states || states.includes(t.job_state ?? "")) && (!q || t.title.toLowerCase().includes(q)));
      const page = hit.slice(0, 50);
      return json({ tasks: page, next_before: hit.length > 50 ? page[49]?.id : undefined });
    };
    return { fetch: f as typeof fetch, asked, jobsAsked, last: () => asked[asked.length - 1] ?? new URLSearchParams() };
  }

  it("sends the state filter and the debounced search to the server and pages from the first page on each change", async () => {
    const s = server();
    const user = userEvent.setup();
    renderList(s.fetch);
    await waitFor(() => expect(screen.getAllByTestId("task-row")).toHaveLength(50));

    await user.selectOptions(screen.getByTestId("task-filter-state"), "failed");
    await waitFor(() => expect(s.last().get("state")).toBe("failed"));
    await waitFor(() => expect(screen.getAllByTestId("task-row")[0]).toHaveAttribute("data-status", "failed"));
    expect(screen.getAllByTestId("task-row").every((r) => r.getAttribute("data-status") === "failed")).toBe(true);
    // The page's jobs (executor, duration) are asked for in that state too.
    await waitFor(() => expect(s.jobsAsked.some((p) => p.get("state") === "failed")).toBe(true));

    await user.click(screen.getByTestId("page-next"));
    await waitFor(() => expect(s.last().get("before")).not.toBeNull());
    expect(s.last().get("state")).toBe("failed");
    await waitFor(() => expect(screen.getByText("Page 2")).toBeInTheDocument());

    // Typing asks once it pauses, not at every key (five keys typed at
    // once: fewer than five searches however slow the machine), with the
    // state kept, back on the first page.
    const before = s.asked.length;
    await user.type(screen.getByTestId("task-search"), "LOGIN");
    await waitFor(() => expect(s.last().get("q")).toBe("LOGIN"));
    const searched = new Set(s.asked.slice(before).map((p) => p.get("q")).filter((q) => q !== null));
    expect(searched.size).toBeLessThan(5);
    expect(s.last().get("state")).toBe("failed");
    expect(s.last().get("before")).toBeNull();
    await waitFor(() => expect(screen.getAllByTestId("task-row")).toHaveLength(1));
    expect(screen.getByTestId("task-row")).toHaveAttribute("data-task-id", "115");
    expect(screen.getByText("Page 1")).toBeInTheDocument();
  });

  // A new server's list said only "No tasks.": not what the page is for
  // nor how to give the first task. A filtered list with no row is not an
  // empty server.
  it("says how to give the first task when the server has none", async () => {
    const empty = (async () => json({ tasks: [] })) as typeof fetch;
    const { unmount } = renderList(empty);
    const msg = await screen.findByTestId("task-list-empty");
    expect(msg).toHaveTextContent("No tasks yet.");
    expect(within(msg).getByRole("link", { name: "New task" })).toHaveAttribute("href", "/tasks/new");
    unmount();
    renderList(empty, "/?q=nothing");
    const none = await screen.findByTestId("task-list-empty");
    expect(none).toHaveTextContent("None is in this state or matches this search.");
    expect(within(none).queryByRole("link")).toBeNull();
  });

  // Paging with the keyboard: the button that led to the first or the
  // last page is then disabled, and the focus it held went to <body>.
  it("gives the focus to the other page button at the first and the last page", async () => {
    const s = server();
    const user = userEvent.setup();
    renderList(s.fetch);
    await waitFor(() => expect(screen.getAllByTestId("task-row")).toHaveLength(50));
    const older = screen.getByTestId("page-next");
    const newer = screen.getByTestId("page-prev");
    older.focus();
    await user.keyboard("{Enter}");
    await waitFor(() => expect(screen.getByText("Page 2")).toBeInTheDocument());
    await waitFor(() => expect(screen.getAllByTestId("task-row")[0]).toHaveAttribute("data-task-id", "70"));
    expect(document.activeElement).toBe(older);
    await user.keyboard("{Enter}");
    await waitFor(() => expect(screen.getAllByTestId("task-row")).toHaveLength(20));
    await waitFor(() => expect(older).toBeDisabled());
    expect(document.activeElement).toBe(newer);
    await user.keyboard("{Enter}");
    await waitFor(() => expect(screen.getAllByTestId("task-row")[0]).toHaveAttribute("data-task-id", "70"));
    await user.keyboard("{Enter}");
    await waitFor(() => expect(screen.getAllByTestId("task-row")[0]).toHaveAttribute("data-task-id", "120"));
    await waitFor(() => expect(newer).toBeDisabled());
    expect(document.activeElement).toBe(older);
  });

  // The filter, the search and the page are in the address: Back from a
  // task, a reload or a link shows the same list (they were component
  // state, lost on leaving the page), and paging is a step of history.
  it("keeps the filter, the search and the page in the address", async () => {
    const s = server();
    const user = userEvent.setup();
    render(
      <Wrap fetch={s.fetch} path="/?state=failed&q=task&pages=100">
        <Routes>
          <Route path="/" element={<TaskList />} />
          <Route path="/tasks/:id" element={<p>a task</p>} />
        </Routes>
        <Where />
      </Wrap>,
    );
    await waitFor(() => expect(screen.getAllByTestId("task-row")[0]).toHaveAttribute("data-task-id", "99"));
    expect(s.last().get("state")).toBe("failed");
    expect(s.last().get("q")).toBe("task");
    expect(s.last().get("before")).toBe("100");
    expect(screen.getByTestId("task-search")).toHaveValue("task");
    expect(screen.getByTestId("task-filter-state")).toHaveValue("failed");
    expect(screen.getByText("Page 2")).toBeInTheDocument();

    await user.click(screen.getByTestId("page-prev"));
    await waitFor(() => expect(screen.getByTestId("where")).toHaveTextContent("/?state=failed&q=task"));
    await user.selectOptions(screen.getByTestId("task-filter-state"), "queued");
    await waitFor(() => expect(screen.getByTestId("where")).toHaveTextContent("/?state=queued&q=task"));
    await user.clear(screen.getByTestId("task-search"));
    await user.type(screen.getByTestId("task-search"), "login");
    await waitFor(() => expect(screen.getByTestId("where")).toHaveTextContent("/?state=queued&q=login"));
  });
});

// Where shows the router's location.
function Where() {
  const l = useLocation();
  return <p data-testid="where">{l.pathname + l.search}</p>;
}
