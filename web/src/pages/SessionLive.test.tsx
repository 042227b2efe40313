import { describe, expect, it } from "vitest";
import { render, screen, waitFor } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { Route, Routes } from "react-router";
import SessionLive from "./SessionLive";
import { json, toRequest, Wrap } from "../test/helpers";

// renderSession1 shows live session s1's page, its API answered by f.
function renderSession1(f: typeof fetch) {
  render(
    <Wrap fetch={f} path="/sessions/s1">
      <Routes>
        <Route path="/sessions/:id" element={<SessionLive />} />
      </Routes>
    </Wrap>,
  );
}

// subscribed answers the subscribe of session s1 as its controller, the
// session's provider being provider.
const subscribed = (provider: string) =>
  json({
    connection_id: "conn_a",
    subscription_id: "sub_a",
    role: "controller",
    controller_lease_granted: true,
    controller_connection_id: "conn_a",
    lease_expires_at: null,
    snapshot: { session_id: "s1", cursor: 0, state: { provider, controller_connection_id: "conn_a" } },
  });

// A live session on a user-defined agent CLI without cost_tracking and
// image_input: the usage widget shows the tokens but not the cost, and the
// prompt box uploads a text file but leaves an image out.
describe("SessionLive on an agent CLI without cost or images", () => {
  it("gates the cost widget and image attachments by the CLI's capabilities", async () => {
    const uploads: string[] = [];
    const f = (async (input: RequestInfo | URL, init?: RequestInit) => {
      const req = toRequest(input, init);
      const url = new URL(req.url);
      const p = url.pathname;
      if (p === "/api/v1/agents")
        return json({ agents: [{ id: "fake-cli", name: "Fake CLI", source: "user file", binary: "fake", parser: "p", capabilities: {} }], invalid: [] });
      if (p === "/api/headless/sessions/s1/subscribe")
        return subscribed("fake-cli");
      if (p === "/api/headless/sessions/s1/events") {
        const frames = [
          { type: "message", cursor: 1, message: { type: "response_start", response_id: "r" } },
          { type: "message", cursor: 2, message: { type: "response_end", response_id: "r", usage: { input_tokens: 1200, output_tokens: 34, total_cost_usd: 0.5, provider: "fake-cli" } } },
        ];
        const body = new ReadableStream<Uint8Array>({
          start(c) {
            c.enqueue(new TextEncoder().encode(frames.map((e) => `data: ${JSON.stringify(e)}\n\n`).join("")));
            // left open: the stream stays live
          },
        });
        return new Response(body, { headers: { "Content-Type": "text/event-stream" } });
      }
      if (p === "/api/headless/sessions/s1/attachments" && req.method === "POST") {
        expect(req.headers.get("x-maestro-headless-subscriber-id")).toBe("sub_a");
        const name = url.searchParams.get("name") ?? "";
        uploads.push(name);
        return json({ path: `.maestro-attachments/${name}`, bytes: (await req.arrayBuffer()).byteLength }, 201);
      }
      return json({ success: true });
    }) as typeof fetch;
    renderSession1(f);
    const usage = await screen.findByTestId("session-usage");
    await waitFor(() => expect(usage.dataset.inputTokens).toBe("1200"));
    await waitFor(() => expect(screen.getByTestId("session-cost").textContent).toBe("cost: not reported by Fake CLI"));
    expect(usage.dataset.cost).toBeUndefined();
    // The connection is announced once: the header's badge and the log's
    // label both said "● live" in a live region, and a reconnect was read
    // out twice.
    await waitFor(() => expect(screen.getByTestId("session-state").dataset.link).toBe("live"));
    await waitFor(() => expect(screen.getByTestId("event-log").dataset.connected).toBe("true"));
    const speaking = [...document.querySelectorAll("[aria-live]:not([aria-live='off']), [role='status'], [role='alert']")].filter((el) => el.textContent?.includes("● live"));
    expect(speaking).toHaveLength(1);
    expect(usage.textContent).toContain("1,200 tokens in / 34 out");

    await waitFor(() => expect((screen.getByTestId("attach-files") as HTMLInputElement).disabled).toBe(false));
    const user = userEvent.setup({ applyAccept: false });
    await user.upload(screen.getByTestId("attach-files"), [new File(["png"], "shot.png", { type: "image/png" }), new File(["notes"], "notes.md", { type: "text/markdown" })]);
    await waitFor(() => expect(screen.getByTestId("attached-file").dataset.path).toBe(".maestro-attachments/notes.md"));
    expect(uploads).toEqual(["notes.md"]);
    expect(screen.getByTestId("attach-error").textContent).toContain("Fake CLI takes no images: shot.png left out");

    // Removed with the keyboard, the file's button goes: the picker takes
    // the focus (it went to <body>).
    screen.getByRole("button", { name: "Remove notes.md" }).focus();
    await user.keyboard("{Enter}");
    expect(screen.queryByTestId("attached-file")).toBeNull();
    expect(document.activeElement).toBe(screen.getByTestId("attach-files"));
  });
});

// A link to a session the server does not have (it ended, the server
// restarted, a typo) says so and offers the list: it showed an empty log,
// a prompt box and "you do not hold the controller lease" under the
// attach API's "Headless session not found".
describe("SessionLive of a session the server does not have", () => {
  it("says the session is gone and links to the list, with no prompt box", async () => {
    const f = (async (input: RequestInfo | URL, init?: RequestInit) => {
      const p = new URL(toRequest(input, init).url).pathname;
      if (p === "/api/v1/agents") return json({ agents: [], invalid: [] });
      return json({ error: { code: "session_not_found", message: "Headless session not found" } }, 404);
    }) as typeof fetch;
    render(
      <Wrap fetch={f} path="/sessions/gone-1">
        <Routes>
          <Route path="/sessions/:id" element={<SessionLive />} />
        </Routes>
      </Wrap>,
    );
    expect((await screen.findByTestId("session-gone")).textContent).toContain("This server has no live session gone-1");
    expect(screen.getByTestId("session-gone-list").getAttribute("href")).toBe("/sessions");
    expect(screen.queryByTestId("prompt")).toBeNull();
    expect(screen.queryByText(/controller lease/)).toBeNull();
  });
});

// maestro serve stopped (which ends its sessions) and started again: the
// session's stream answers 410 stale_session, which was taken for a drop.
// The page said "○ reconnecting…" for ever, "you control this session"
// and kept the prompt box open.
describe("SessionLive of a session that ended while it was open", () => {
  it("says it ended, with the server's reason, and closes the prompt box", async () => {
    const ended = { error: "Headless session s1 ended at 2026-11-28T03:02:47Z: its serve process died", error_type: "invalid_request", code: "stale_session" };
    let streams = 0;
    const f = (async (input: RequestInfo | URL, init?: RequestInit) => {
      const p = new URL(toRequest(input, init).url).pathname;
      if (p === "/api/v1/agents") return json({ agents: [], invalid: [] });
      if (p === "/api/headless/sessions/s1/subscribe") return subscribed("replay");
      if (p === "/api/headless/sessions/s1/events") {
        streams++;
        return json(ended, 410);
      }
      if (p === "/api/headless/sessions/s1") return json(ended, 410);
      return json({ success: true });
    }) as typeof fetch;
    renderSession1(f);
    await waitFor(() => expect(screen.getByTestId("session-state")).toHaveAttribute("data-link", "ended"));
    expect(streams).toBe(1);
    expect(screen.getByTestId("session-error")).toHaveTextContent("its serve process died");
    expect(screen.getByTestId("lease-state")).toHaveTextContent("this session has ended");
    expect(screen.getByTestId("prompt")).toBeDisabled();
    expect(screen.getByTestId("event-log-state")).toHaveTextContent("ended");
  });
});

// The keyboard stays in the prompt box: Send and Interrupt are disabled
// once they have done their work, and the approval dialog's buttons go
// when it is answered. Each left the focus on <body>: the next Tab went to
// the top of the window, through the navigation again.
describe("SessionLive with the keyboard", () => {
  it("gives the focus back to the prompt after Send, an approval set aside or answered, and Interrupt", async () => {
    const sent: string[] = [];
    let push: (e: Record<string, unknown>) => void = () => undefined;
    const f = (async (input: RequestInfo | URL, init?: RequestInit) => {
      const req = toRequest(input, init);
      const p = new URL(req.url).pathname;
      if (p === "/api/v1/agents") return json({ agents: [], invalid: [] });
      if (p === "/api/headless/sessions/s1/subscribe")
        return subscribed("replay");
      if (p === "/api/headless/sessions/s1/events") {
        const body = new ReadableStream<Uint8Array>({
          start(c) {
            push = (e) => c.enqueue(new TextEncoder().encode(`data: ${JSON.stringify(e)}\n\n`));
          },
        });
        return new Response(body, { headers: { "Content-Type": "text/event-stream" } });
      }
      if (p === "/api/headless/sessions/s1/messages") sent.push(String((JSON.parse(await req.text()) as { type?: string }).type));
      return json({ success: true });
    }) as typeof fetch;
    renderSession1(f);
    const prompt = await screen.findByTestId("prompt");
    await waitFor(() => expect(prompt).not.toBeDisabled());
    const user = userEvent.setup();
    await user.click(prompt);
    await user.keyboard("write the file");
    screen.getByTestId("send-prompt").focus();
    await user.keyboard("{Enter}");
    await waitFor(() => expect(sent).toContain("prompt"));
    await waitFor(() => expect(screen.getByTestId("send-prompt")).toBeDisabled());
    expect(document.activeElement).toBe(prompt);

    let cursor = 0;
    push({ type: "message", cursor: ++cursor, message: { type: "response_start", response_id: "r" } });
    push({ type: "message", cursor: ++cursor, message: { type: "server_request", request_id: "q1", request_type: "approval", call_id: "c1", tool: "Write", args: { path: "a.txt" } } });
    // Escape sets the request aside, unanswered, to read the log behind
    // the dialog (it did nothing); "Answer the request" opens it again.
    await user.click(await screen.findByTestId("request-reason"));
    // The tab says the agent waits (it said "Maestro" on every page).
    expect(document.title).toBe("Session s1 (waiting for you) · Maestro");
    await user.keyboard("{Escape}");
    expect(screen.queryByTestId("approve")).toBeNull();
    expect(screen.getByTestId("request-dialog")).not.toHaveAttribute("open");
    expect(sent).not.toContain("server_request_response");
    expect(document.activeElement).toBe(prompt);
    await user.click(screen.getByTestId("show-request"));
    const approve = await screen.findByTestId("approve");
    expect(screen.queryByTestId("show-request")).toBeNull();
    approve.focus();
    await user.keyboard("{Enter}");
    await waitFor(() => expect(sent).toContain("server_request_response"));
    push({ type: "message", cursor: ++cursor, message: { type: "server_request_resolved", request_id: "q1", request_type: "approval", resolution: "approved", resolved_by: "user" } });
    await waitFor(() => expect(screen.queryByTestId("approve")).toBeNull());
    expect(document.activeElement).toBe(prompt);

    const interrupt = screen.getByTestId("interrupt");
    expect(interrupt).not.toBeDisabled();
    interrupt.focus();
    await user.keyboard("{Enter}");
    await waitFor(() => expect(sent).toContain("interrupt"));
    push({ type: "message", cursor: ++cursor, message: { type: "response_end", response_id: "r" } });
    await waitFor(() => expect(interrupt).toBeDisabled());
    expect(document.activeElement).toBe(prompt);
  });
});

describe("SessionLive, taking control with the keyboard", () => {
  it("gives the focus to the prompt once this client controls the session", async () => {
    const f = (async (input: RequestInfo | URL, init?: RequestInit) => {
      const req = toRequest(input, init);
      const p = new URL(req.url).pathname;
      if (p === "/api/v1/agents") return json({ agents: [], invalid: [] });
      if (p === "/api/headless/sessions/s1/subscribe") {
        const body = (await req.json()) as { takeControl?: boolean };
        if (!body.takeControl) return json({ error: { code: "controller_lease_held", message: "Another client holds the controller lease" } }, 409);
        return json({
          connection_id: "conn_b",
          subscription_id: "sub_b",
          role: "controller",
          controller_lease_granted: true,
          controller_connection_id: "conn_b",
          lease_expires_at: null,
          snapshot: { session_id: "s1", cursor: 0, state: { provider: "replay", controller_connection_id: "conn_b" } },
        });
      }
      if (p === "/api/headless/sessions/s1/events") return new Response(new ReadableStream<Uint8Array>({ start() {} }), { headers: { "Content-Type": "text/event-stream" } });
      return json({ success: true });
    }) as typeof fetch;
    renderSession1(f);
    const user = userEvent.setup();
    (await screen.findByTestId("take-control")).focus();
    await user.keyboard("{Enter}");
    await user.tab();
    expect(document.activeElement).toBe(screen.getByTestId("confirm-ok"));
    await user.keyboard("{Enter}");
    await waitFor(() => expect(screen.getByTestId("session-state").dataset.controller).toBe("true"));
    expect(screen.queryByTestId("take-control")).toBeNull();
    // Not <body>: the next key goes to the prompt.
    expect(document.activeElement).toBe(screen.getByTestId("prompt"));
  });
});
