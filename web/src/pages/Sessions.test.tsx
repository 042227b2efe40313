import { describe, expect, it } from "vitest";
import { render, screen, waitFor } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import Sessions from "./Sessions";
import { json, toRequest, Wrap } from "../test/helpers";

// renderSessions shows the live sessions page over f.
function renderSessions(f: typeof fetch) {
  render(
    <Wrap fetch={f} path="/sessions">
      <Sessions />
    </Wrap>,
  );
}

describe("Sessions", () => {
  it("lists live sessions and creates one on an installed agent CLI only", async () => {
    const posted: unknown[] = [];
    const f = (async (input: RequestInfo | URL, init?: RequestInit) => {
      const req = toRequest(input, init);
      const url = new URL(req.url);
      if (url.pathname === "/api/headless/sessions" && req.method === "GET")
        return json({ sessions: [{ session_id: "s1", cursor: 3, state: { provider: "replay", model: "demo", cwd: "/w", connection_count: 2, pending_requests: [{ id: "c1" }] } }] });
      if (url.pathname === "/api/headless/sessions" && req.method === "POST") {
        posted.push(await req.json());
        return json({ session_id: "s2", cursor: 1, state: {} });
      }
      if (url.pathname === "/api/v1/agents")
        return json({
          agents: [
            { id: "claude-code", name: "Claude Code", source: "built-in", binary: "claude", path: "/bin/claude", parser: "p", capabilities: {} },
            { id: "codex", name: "Codex", source: "built-in", binary: "codex", parser: "p", capabilities: {} },
          ],
          invalid: [],
        });
      return json({ error: "unexpected " + url.pathname }, 500);
    }) as typeof fetch;
    renderSessions(f);
    const row = await screen.findByText("s1");
    expect(row.closest("tr")?.textContent).toContain("waiting for you");
    await waitFor(() => expect(screen.getByRole("option", { name: "agent CLI: Claude Code" })).toBeTruthy());
    // Codex is not installed: not offered.
    expect(screen.queryByRole("option", { name: "agent CLI: Codex" })).toBeNull();
    await userEvent.selectOptions(screen.getByLabelText("Runs on"), "claude-code");
    await userEvent.selectOptions(screen.getByLabelText("Approval mode"), "fail");
    await userEvent.click(screen.getByTestId("create-session"));
    await waitFor(() => expect(posted).toHaveLength(1));
    expect(posted[0]).toMatchObject({ agent: "claude-code", approvalMode: "fail" });
  });

  // A refused workspace is named as the form names it (Workspace), not by
  // the API's field name: the alert said 'workspaceRoot "relative/x":
  // expected an absolute path…' under a field labelled Workspace.
  it("says a refused workspace in the form's words", async () => {
    const refusals = [
      'workspaceRoot "relative/x": expected an absolute path to an existing directory on the server',
      'workspaceRoot "/srv/x": this server listens beyond loopback and allows no client-chosen directory; omit workspaceRoot for a fresh workspace, or start maestro serve with --workspace-root DIR',
    ];
    let n = 0;
    const f = (async (input: RequestInfo | URL, init?: RequestInit) => {
      const req = toRequest(input, init);
      const url = new URL(req.url);
      if (url.pathname === "/api/headless/sessions" && req.method === "POST") return json({ error: refusals[n++], code: "bad_request" }, 400);
      if (url.pathname === "/api/headless/sessions") return json({ sessions: [] });
      return json({ agents: [] });
    }) as typeof fetch;
    renderSessions(f);
    await userEvent.type(screen.getByLabelText(/^Workspace/), "relative/x");
    await userEvent.click(screen.getByTestId("create-session"));
    expect(await screen.findByRole("alert")).toHaveTextContent('Workspace "relative/x": expected an absolute path to an existing directory on the server');
    // The field it names has the focus.
    expect(document.activeElement).toBe(screen.getByLabelText(/^Workspace/));
    await userEvent.click(screen.getByTestId("create-session"));
    await waitFor(() =>
      expect(screen.getByRole("alert")).toHaveTextContent(
        'Workspace "/srv/x": this server listens beyond loopback and allows no client-chosen directory; leave Workspace empty for a fresh workspace, or start maestro serve with --workspace-root DIR',
      ),
    );
    expect(screen.getByRole("alert").textContent).not.toContain("workspaceRoot");
  });

  // While it asks, Start session keeps the focus (disabled, it dropped it
  // on <body> until the answer came) and a second press asks nothing.
  it("keeps the focus on Start session while it asks, and asks once", async () => {
    let posts = 0;
    let answer: (r: Response) => void = () => undefined;
    const f = (async (input: RequestInfo | URL, init?: RequestInit) => {
      const req = toRequest(input, init);
      const url = new URL(req.url);
      if (url.pathname === "/api/headless/sessions" && req.method === "POST") {
        posts++;
        return new Promise<Response>((r) => (answer = r));
      }
      if (url.pathname === "/api/headless/sessions") return json({ sessions: [] });
      return json({ agents: [] });
    }) as typeof fetch;
    renderSessions(f);
    const user = userEvent.setup();
    const start = screen.getByTestId("create-session");
    start.focus();
    await user.keyboard("{Enter}");
    await waitFor(() => expect(posts).toBe(1));
    expect(start).toHaveAttribute("aria-disabled", "true");
    expect(start).not.toBeDisabled();
    expect(document.activeElement).toBe(start);
    await user.keyboard("{Enter}");
    await user.click(start);
    expect(posts).toBe(1);
    answer(json({ error: "the server is shutting down", code: "unavailable" }, 503));
    expect(await screen.findByRole("alert")).toHaveTextContent("the server is shutting down");
    expect(start).not.toHaveAttribute("aria-disabled");
    expect(document.activeElement).toBe(start);
  });

  it("does not say there is no session when the server does not answer", async () => {
    // The list could not be read, and the table said "No live session on
    // this server." under the error, which a user took for the answer.
    renderSessions((async () => {
      throw new TypeError("Failed to fetch");
    }) as typeof fetch);
    expect(await screen.findByTestId("sessions-error")).toHaveTextContent("The server does not answer");
    expect(screen.queryByText("No live session on this server.")).toBeNull();
  });
});
