import { describe, expect, it } from "vitest";
import { act, render, screen } from "@testing-library/react";
import { useState } from "react";
import { EditorView } from "@codemirror/view";
import YamlEditor from "./YamlEditor";

let setValue: (v: string) => void = () => undefined;
const handedUp: string[] = [];

// A parent that draws the documents the editor hands up when the test says
// (late, as a busy page does).
function Parent() {
  const [value, set] = useState("name: a\n");
  setValue = set;
  return <YamlEditor value={value} onChange={(v) => handedUp.push(v)} faults={[]} label="YAML" />;
}

describe("YamlEditor", () => {
  // An edit made before the page has drawn the previous one stays: the
  // previous document, coming back as the value once the edit was made,
  // replaced the editor's (in the studio, a paste right after a key was
  // lost now and then).
  it("keeps an edit made before the previous document came back as the value", () => {
    render(<Parent />);
    const content = screen.getByTestId("piece-editor").shadowRoot!.querySelector(".cm-content") as HTMLElement;
    const view = EditorView.findFromDOM(content)!;
    view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: "name: b\n" } });
    view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: "name: c\n" } });
    expect(handedUp).toEqual(["name: b\n", "name: c\n"]);
    act(() => setValue("name: b\n"));
    expect(view.state.doc.toString()).toBe("name: c\n");
    act(() => setValue("name: c\n"));
    expect(view.state.doc.toString()).toBe("name: c\n");
    // A value from outside (Discard changes, a version, the conflict's
    // "theirs") replaces the document.
    act(() => setValue("name: d\n"));
    expect(view.state.doc.toString()).toBe("name: d\n");
  });
});
