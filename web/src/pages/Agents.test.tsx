import { describe, expect, it } from "vitest";
import { render, screen } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import Agents from "./Agents";
import { json, Wrap } from "../test/helpers";

const agent = (id: string, name: string) => ({ id, name, source: "built-in", binary: id, parser: "p", capabilities: {} });

// The chosen agent's row was shown by its tint alone: a screen reader was
// not told which agent the panel below is about.
describe("Agents", () => {
  it("tells which agent is chosen, not by colour alone", async () => {
    const f = (async () => json({ agents: [agent("claude", "Claude Code"), agent("codex", "Codex")], invalid: [] })) as typeof fetch;
    render(
      <Wrap fetch={f} path="/agents?agent=claude">
        <Agents />
      </Wrap>,
    );
    const claude = await screen.findByRole("button", { name: "Claude Code" });
    const codex = screen.getByRole("button", { name: "Codex" });
    expect(claude).toHaveAttribute("aria-current", "true");
    expect(codex).not.toHaveAttribute("aria-current");
    await userEvent.click(codex);
    expect(codex).toHaveAttribute("aria-current", "true");
    expect(claude).not.toHaveAttribute("aria-current");
  });

  // The listing asks every CLI for its version, a few seconds the first
  // time: the table stood empty meanwhile, as if none were installed.
  it("says it is looking while the list loads", async () => {
    let answer: (r: Response) => void = () => {};
    const f = (() => new Promise<Response>((res) => (answer = res))) as typeof fetch;
    render(
      <Wrap fetch={f} path="/agents">
        <Agents />
      </Wrap>,
    );
    expect(await screen.findByTestId("agents-loading")).toHaveTextContent("asking each for its version");
    answer(json({ agents: [agent("claude", "Claude Code")], invalid: [] }));
    await screen.findByRole("button", { name: "Claude Code" });
    expect(screen.queryByTestId("agents-loading")).toBeNull();
  });

  // A binary that is there but cannot be run was "not found", and the
  // user looked for a missing install.
  it("names a binary that is there but cannot be run", async () => {
    const unusable = "/opt/bin/claude: not executable (chmod +x /opt/bin/claude)";
    const f = (async () => json({ agents: [{ ...agent("claude", "Claude Code"), unusable }, agent("codex", "Codex")], invalid: [] })) as typeof fetch;
    render(
      <Wrap fetch={f} path="/agents">
        <Agents />
      </Wrap>,
    );
    const cell = await screen.findByText(`unusable (${unusable})`);
    expect(cell).toHaveAttribute("title", unusable);
    expect(screen.getByText("not found (codex)")).toBeInTheDocument();
  });

  // With none installed, each row said "not found" and nothing said what
  // to do; with one installed, nothing more is said.
  it("says how to install one when none is installed", async () => {
    const none = (async () => json({ agents: [agent("claude", "Claude Code"), agent("codex", "Codex")], invalid: [] })) as typeof fetch;
    const { unmount } = render(
      <Wrap fetch={none} path="/agents">
        <Agents />
      </Wrap>,
    );
    expect(await screen.findByTestId("agents-none")).toHaveTextContent("None of these agent CLIs is installed on this server: it runs the ones it finds on its PATH (claude, codex). Install one");
    unmount();
    const one = (async () => json({ agents: [{ ...agent("claude", "Claude Code"), path: "/usr/bin/claude" }, agent("codex", "Codex")], invalid: [] })) as typeof fetch;
    render(
      <Wrap fetch={one} path="/agents">
        <Agents />
      </Wrap>,
    );
    await screen.findByText("/usr/bin/claude");
    expect(screen.queryByTestId("agents-none")).toBeNull();
  });
});
