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
});
