import { useState } from "react";
import { afterEach, describe, expect, it } from "vitest";
import { render, screen, within, waitFor } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { CSVTable, cutShort, Deliverables, previewKind } from "./Deliverables";
import { parseCSV } from "../lib/csv";
import { clearToken, setToken } from "../api/auth";
import { base, json, Wrap } from "../test/helpers";

describe("parseCSV", () => {
  const cases: { name: string; text: string; want: string[][] }[] = [
    { name: "plain", text: "a,b\n1,2\n", want: [["a", "b"], ["1", "2"]] },
    { name: "CRLF and no final newline", text: "a,b\r\n1,2", want: [["a", "b"], ["1", "2"]] },
    { name: "quoted comma, quote and newline", text: 'n,q\n"x, y","say ""hi""\nthere"\n', want: [["n", "q"], ["x, y", 'say "hi"\nthere']] },
    { name: "empty fields", text: ",,\n", want: [["", "", ""]] },
  ];
  for (const c of cases) it(c.name, () => expect(parseCSV(c.text)).toEqual(c.want));
});

describe("CSV preview", () => {
  it("renders a CSV deliverable as a table with a header row", async () => {
    const csv = 'city,count\n"Paris, FR",3\nOslo,5\n';
    const calls: string[] = [];
    const f = (async (req: Request) => {
      calls.push(`${req.method} ${new URL(req.url).pathname} ${req.headers.get("Range") ?? ""}`);
      const path = new URL(req.url).pathname;
      if (path === "/api/v1/tasks/4/deliverables")
        return json({ files: [{ path: "data/cities.csv", size: csv.length, modified: "2026-11-26T12:00:00Z" }] });
      if (path === "/api/v1/tasks/4/deliverables/data/cities.csv") return new Response(csv, { status: 206 });
      return json({ error: "no" }, 404);
    }) as typeof fetch;
    render(
      <Wrap fetch={f}>
        <Deliverables taskId={4} refreshKey="x" />
      </Wrap>,
    );
    const row = await screen.findByTestId("deliverable-row");
    expect(row).toHaveAttribute("data-path", "data/cities.csv");
    expect(row).toHaveAttribute("data-size", String(csv.length));
    expect(within(row).getByTestId("deliverable-download")).toHaveAttribute(
      "href",
      "/api/v1/tasks/4/deliverables/data/cities.csv",
    );
    await userEvent.click(within(row).getByTestId("deliverable-preview-button"));
    const preview = await screen.findByTestId("deliverable-preview");
    const table = await within(preview).findByRole("table");
    expect(within(table).getAllByRole("columnheader").map((h) => h.textContent)).toEqual(["city", "count"]);
    const cells = within(table).getAllByRole("cell").map((c) => c.textContent);
    expect(cells).toEqual(["Paris, FR", "3", "Oslo", "5"]);
    await waitFor(() => expect(calls).toContain("GET /api/v1/tasks/4/deliverables/data/cities.csv bytes=0-1048575"));
    expect(base).toMatch(/^http/);
  });

  it("says when rows were cut", () => {
    const text = "h\n" + Array.from({ length: 12 }, (_, i) => String(i)).join("\n");
    render(<CSVTable text={text} maxRows={10} />);
    expect(screen.getAllByRole("row")).toHaveLength(11);
    expect(screen.getByText("First 10 rows shown.")).toBeInTheDocument();
  });

  const kinds: [string, string][] = [
    ["a.csv", "csv"],
    ["README.md", "markdown"],
    ["img/x.PNG", "image"],
    ["notes.txt", "text"],
    ["Makefile", "text"],
    ["archive.zip", "none"],
  ];
  for (const [p, k] of kinds) it(`previewKind(${p})`, () => expect(previewKind(p)).toBe(k));
});

describe("Deliverables list", () => {
  // When the job ends the list's query key changes: the files listed stay
  // shown until the new list comes (it flashed "Loading deliverables…").
  // Another task's files are never shown for this one.
  it("keeps the files shown while the list is fetched again", async () => {
    let release = () => {};
    const held = new Promise<void>((r) => (release = r));
    const calls: string[] = [];
    const f = (async (req: Request) => {
      const path = new URL(req.url).pathname;
      calls.push(path);
      if (path === "/api/v1/tasks/4/deliverables") {
        if (calls.filter((c) => c === path).length === 1) return json({ files: [{ path: "draft.md", size: 3, modified: "2026-11-26T12:00:00Z" }] });
        await held;
        return json({ files: [{ path: "draft.md", size: 3, modified: "2026-11-26T12:00:00Z" }, { path: "final.md", size: 5, modified: "2026-11-26T12:01:00Z" }] });
      }
      if (path === "/api/v1/tasks/5/deliverables") {
        await held;
        return json({ files: [] });
      }
      return json({ error: "no" }, 404);
    }) as typeof fetch;
    function Job() {
      const [key, setKey] = useState({ task: 4, job: "running" });
      return (
        <>
          <button type="button" onClick={() => setKey({ task: 4, job: "succeeded" })}>
            end
          </button>
          <button type="button" onClick={() => setKey({ task: 5, job: "running" })}>
            other
          </button>
          <Deliverables taskId={key.task} refreshKey={key.job} />
        </>
      );
    }
    render(
      <Wrap fetch={f}>
        <Job />
      </Wrap>,
    );
    expect(await screen.findByTestId("deliverable-row")).toHaveAttribute("data-path", "draft.md");
    await userEvent.click(screen.getByRole("button", { name: "end" }));
    await waitFor(() => expect(calls.filter((c) => c === "/api/v1/tasks/4/deliverables")).toHaveLength(2));
    expect(screen.queryByText("Loading deliverables…")).toBeNull();
    expect(screen.getAllByTestId("deliverable-row").map((r) => r.dataset.path)).toEqual(["draft.md"]);
    await userEvent.click(screen.getByRole("button", { name: "other" }));
    expect(await screen.findByText("Loading deliverables…")).toBeInTheDocument();
    expect(screen.queryByTestId("deliverable-row")).toBeNull();
    release();
    expect(await screen.findByText("No deliverables yet.")).toBeInTheDocument();
  });
});

describe("Deliverables download", () => {
  afterEach(clearToken);
  // With a token the file is fetched and handed over as a blob: a download
  // the server refused (the file gone, a 500) or that got no answer did
  // nothing at all, the button pressed and no word why.
  it("says why a download failed", async () => {
    setToken("secret", false);
    let down = false;
    const f = (async (req: Request) => {
      const path = new URL(req.url).pathname;
      if (down) throw new TypeError("Failed to fetch");
      if (path === "/api/v1/tasks/4/deliverables") return json({ files: [{ path: "report.md", size: 3, modified: "2026-11-26T12:00:00Z" }] });
      return json({ error: "deliverable report.md: not found" }, 404);
    }) as typeof fetch;
    render(
      <Wrap fetch={f}>
        <Deliverables taskId={4} refreshKey="x" />
      </Wrap>,
    );
    const user = userEvent.setup();
    await user.click(await screen.findByTestId("deliverable-download"));
    expect(await screen.findByTestId("deliverable-error")).toHaveTextContent("report.md could not be downloaded: deliverable report.md: not found");
    down = true;
    await user.click(screen.getByTestId("deliverable-download"));
    await waitFor(() => expect(screen.getByTestId("deliverable-error")).toHaveTextContent("report.md could not be downloaded: The server does not answer"));
    // The list stays: its files are still there to try again.
    expect(screen.getByTestId("deliverable-row")).toHaveAttribute("data-path", "report.md");
  });
});

describe("cutShort", () => {
  const cases: [string, number, string | null, boolean][] = [
    ["whole file, 200", 200, null, false],
    ["small file answered 206 with its whole length", 206, "bytes 0-49/50", false],
    ["file exactly the preview size", 206, `bytes 0-${(1 << 20) - 1}/${1 << 20}`, false],
    ["larger file cut at the preview size", 206, `bytes 0-${(1 << 20) - 1}/${(1 << 20) + 1}`, true],
    ["206 without a usable total", 206, "bytes 0-99/*", true],
  ];
  for (const [name, status, range, want] of cases) {
    it(name, () => expect(cutShort(status, range)).toBe(want));
  }
});
