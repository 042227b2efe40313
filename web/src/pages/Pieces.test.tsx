import { describe, expect, it } from "vitest";
import { render, screen } from "@testing-library/react";
import { Route, Routes } from "react-router";
import Pieces from "./Pieces";
import { json, toRequest, Wrap } from "../test/helpers";

// renderWithoutPieceNope renders the studio at path on a server that has
// no piece "nope" (404) and an empty catalog.
function renderWithoutPieceNope(path: string) {
  const f = async (input: RequestInfo | URL, init?: RequestInit) => {
    const url = new URL(toRequest(input, init).url);
    if (url.pathname === "/api/v1/pieces/nope") return json({ error: 'piece "nope" not found' }, 404);
    return json({ pieces: [] });
  };
  render(
    <Wrap fetch={f as typeof fetch} path={path}>
      <Routes>
        <Route path="/pieces/*" element={<Pieces />} />
      </Routes>
    </Wrap>,
  );
}

describe("Pieces studio", () => {
  // A piece the server does not have (a stale link, a typo in the address)
  // says so and offers the catalog: the graph said "Loading…" forever
  // beside a Save button, a diff toggle, "Run this piece" and "New from
  // this", all for a piece that does not exist.
  it("shows only the error for a piece that does not exist", async () => {
    renderWithoutPieceNope("/pieces/nope");
    expect(await screen.findByRole("alert")).toHaveTextContent('piece "nope" not found');
    expect(screen.getByTestId("piece-missing-back")).toHaveAttribute("href", "/pieces");
    expect(screen.queryByText("Loading…")).toBeNull();
    expect(screen.queryByTestId("piece-graph")).toBeNull();
    expect(screen.queryByTestId("piece-save")).toBeNull();
    expect(screen.queryByTestId("piece-diff-toggle")).toBeNull();
    expect(screen.queryByTestId("piece-run")).toBeNull();
    expect(screen.queryByTestId("piece-template")).toBeNull();
  });

  it("shows only the error for a template that does not exist", async () => {
    renderWithoutPieceNope("/pieces/new?from=nope");
    expect(await screen.findByRole("alert")).toHaveTextContent('piece "nope" not found');
    expect(screen.queryByText("Loading…")).toBeNull();
    expect(screen.queryByTestId("piece-save")).toBeNull();
    expect(screen.queryByTestId("piece-name")).toBeNull();
  });

  // The actions appear together once the piece is loaded: Run and New from
  // this used to show first and Delete after the load, moving them under a
  // pointer already on its way (a click meant for New from this hit Delete).
  it("shows Run, New from this and Delete together once the piece is loaded", async () => {
    let release: () => void = () => {};
    const loaded = new Promise<void>((r) => (release = r));
    const f = async (input: RequestInfo | URL, init?: RequestInit) => {
      const url = new URL(toRequest(input, init).url);
      if (url.pathname === "/api/v1/pieces/demo") {
        await loaded;
        return json({ name: "demo", yaml: "name: demo\n", source: "store", version: 1, deletable: true });
      }
      if (url.pathname === "/api/v1/pieces/demo/versions") return json({ versions: [] });
      return json({ pieces: [] });
    };
    render(
      <Wrap fetch={f as typeof fetch} path="/pieces/demo">
        <Routes>
          <Route path="/pieces/*" element={<Pieces />} />
        </Routes>
      </Wrap>,
    );
    expect(await screen.findByRole("heading", { name: /demo/ })).toBeInTheDocument();
    expect(screen.queryByTestId("piece-run")).toBeNull();
    expect(screen.queryByTestId("piece-template")).toBeNull();
    release();
    expect(await screen.findByTestId("piece-delete")).toBeInTheDocument();
    expect(screen.getByTestId("piece-run")).toBeInTheDocument();
    expect(screen.getByTestId("piece-template")).toBeInTheDocument();
  });
});
