import { describe, expect, it } from "vitest";
import { render, screen, waitFor } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { MemoryRouter, useLocation } from "react-router";
import { App, PageError } from "./App";
import { TaskList } from "./pages/TaskList";
import { base, json, toRequest, Wrap } from "./test/helpers";

function Where() {
  const l = useLocation();
  return <output data-testid="where">{l.pathname + l.search}</output>;
}

// A server that wants the token "s3cret" on every API route.
function tokenServer(seen: (string | null)[]) {
  return (async (input: RequestInfo | URL, init?: RequestInit) => {
    const req = toRequest(input, init);
    const auth = req.headers.get("Authorization");
    seen.push(auth);
    if (auth !== "Bearer s3cret") return json({ error: "missing or invalid bearer token" }, 401);
    const path = new URL(req.url).pathname;
    if (path === "/api/v1/tasks") return json({ tasks: [] });
    if (path === "/api/v1/schedules") return json({ schedules: [] });
    if (path === "/api/v1/pieces") return json({ pieces: [] });
    return json({ error: "not found" }, 404);
  }) as typeof fetch;
}

describe("sign-in", () => {
  it("a 401 leads to /signin and a good token leads back", async () => {
    const seen: (string | null)[] = [];
    render(
      <MemoryRouter initialEntries={["/schedules"]}>
        <App fetch={tokenServer(seen)} baseUrl={base} />
        <Where />
      </MemoryRouter>,
    );
    await waitFor(() => expect(screen.getByTestId("where")).toHaveTextContent("/signin?next=%2Fschedules"));
    expect(seen[0]).toBeNull();

    await userEvent.type(screen.getByLabelText("Access token"), "wrong");
    await userEvent.click(screen.getByTestId("signin-submit"));
    expect(await screen.findByTestId("signin-error")).toHaveTextContent("refused");
    // The token field has the focus, to type again.
    expect(document.activeElement).toBe(screen.getByTestId("signin-token"));
    expect(sessionStorage.getItem("maestro.token")).toBeNull();

    await userEvent.clear(screen.getByTestId("signin-token"));
    await userEvent.type(screen.getByTestId("signin-token"), "s3cret");
    await userEvent.click(screen.getByTestId("signin-submit"));
    await waitFor(() => expect(screen.getByTestId("where")).toHaveTextContent(/^\/schedules$/));
    expect(await screen.findByTestId("schedule-list")).toBeInTheDocument();
    expect(sessionStorage.getItem("maestro.token")).toBe("s3cret");
    expect(localStorage.getItem("maestro.token")).toBeNull();
    expect(seen.at(-1)).toBe("Bearer s3cret");
  });

  it("remember keeps the token in localStorage", async () => {
    render(
      <MemoryRouter initialEntries={["/signin?next=/tasks"]}>
        <App fetch={tokenServer([])} baseUrl={base} />
        <Where />
      </MemoryRouter>,
    );
    await userEvent.type(screen.getByLabelText("Access token"), "s3cret");
    await userEvent.click(screen.getByLabelText("Remember on this device"));
    await userEvent.click(screen.getByTestId("signin-submit"));
    await waitFor(() => expect(screen.getByTestId("where")).toHaveTextContent(/^\/tasks$/));
    expect(localStorage.getItem("maestro.token")).toBe("s3cret");
    expect(sessionStorage.getItem("maestro.token")).toBeNull();
  });

  it("a server without a token never shows the sign-in page", async () => {
    const open = (async () => json({ tasks: [] })) as unknown as typeof fetch;
    render(
      <MemoryRouter initialEntries={["/"]}>
        <App fetch={open} baseUrl={base} />
        <Where />
      </MemoryRouter>,
    );
    expect(await screen.findByTestId("task-list")).toBeInTheDocument();
    expect(screen.getByTestId("where")).toHaveTextContent(/^\/$/);
    expect(screen.queryByTestId("signin-token")).toBeNull();
  });
});

// An address the app does not have said only "No such page.": no heading,
// no way on.
describe("an unknown address", () => {
  it("names the address and links to the task list", async () => {
    render(
      <MemoryRouter initialEntries={["/nope/x"]}>
        <App fetch={(async () => json({})) as typeof fetch} baseUrl={base} />
      </MemoryRouter>,
    );
    expect(await screen.findByRole("heading", { name: "No such page" })).toBeInTheDocument();
    expect(screen.getByTestId("no-such-page")).toHaveTextContent("This console has no page /nope/x");
    expect(screen.getByRole("link", { name: "All tasks" })).toHaveAttribute("href", "/");
  });
});

describe("a stopped server", () => {
  it("is said in words, not as the browser's 'Failed to fetch'", async () => {
    const down = (async () => {
      throw new TypeError("Failed to fetch");
    }) as unknown as typeof fetch;
    render(
      <Wrap fetch={down}>
        <TaskList />
      </Wrap>,
    );
    expect(await screen.findByTestId("task-list-error")).toHaveTextContent(
      "The server does not answer: is maestro serve running? (Failed to fetch)",
    );
  });

  it("a page whose code cannot be loaded says so, keeps the navigation, and another page tries again", async () => {
    function Broken(): never {
      throw new TypeError("Failed to fetch dynamically imported module: http://127.0.0.1:7878/assets/Schedules-x.js");
    }
    const silence = console.error;
    console.error = () => undefined; // React reports the caught error
    try {
      const { rerender } = render(
        <PageError path="/schedules">
          <Broken />
        </PageError>,
      );
      expect(screen.getByTestId("page-error")).toHaveTextContent("This page could not be loaded: the server does not answer");
      expect(screen.getByRole("button", { name: "Reload" })).toBeInTheDocument();
      rerender(
        <PageError path="/">
          <p>the task list</p>
        </PageError>,
      );
      expect(screen.queryByTestId("page-error")).toBeNull();
      expect(screen.getByText("the task list")).toBeInTheDocument();
    } finally {
      console.error = silence;
    }
  });
});

describe("focus on a page change", () => {
  it("goes to the new page's content when the control that led there is gone, and stays on a link that stays", async () => {
    const t0 = "2026-11-26T12:00:00Z";
    const server = (async (input: RequestInfo | URL, init?: RequestInit) => {
      const path = new URL(toRequest(input, init).url).pathname;
      if (path === "/api/v1/tasks") return json({ tasks: [{ id: 7, title: "Paint the fence", created_at: t0, updated_at: t0 }] });
      if (path === "/api/v1/tasks/7") return json({ task: { id: 7, title: "Paint the fence", created_at: t0, updated_at: t0 }, jobs: [], comments: [] });
      if (path === "/api/v1/tasks/7/deliverables") return json({ files: [] });
      if (path === "/api/v1/schedules") return json({ schedules: [] });
      if (path === "/api/v1/pieces") return json({ pieces: [] });
      if (path === "/api/v1/jobs") return json({ jobs: [] });
      return json({});
    }) as typeof fetch;
    render(
      <MemoryRouter initialEntries={["/tasks"]}>
        <App fetch={server} baseUrl={base} />
        <Where />
      </MemoryRouter>,
    );
    const link = await screen.findByRole("link", { name: /Paint the fence/ });
    link.focus();
    await userEvent.keyboard("{Enter}");
    await waitFor(() => expect(screen.getByTestId("where")).toHaveTextContent("/tasks/7"));
    expect(await screen.findByTestId("task-title")).toHaveTextContent("Paint the fence");
    // Not <body>: the next Tab goes on from the page, not from the top of the window.
    expect(document.activeElement).toBe(screen.getByRole("main"));
    await userEvent.tab();
    expect(screen.getByRole("navigation", { name: "Main" })).not.toContainElement(document.activeElement as HTMLElement);

    // A link of the navigation stays: it keeps the focus.
    const nav = screen.getByTestId("nav-schedules");
    nav.focus();
    await userEvent.keyboard("{Enter}");
    await waitFor(() => expect(screen.getByTestId("where")).toHaveTextContent("/schedules"));
    expect(document.activeElement).toBe(nav);
  });
});
