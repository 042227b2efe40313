import { useEffect, useRef } from "react";
import { EditorState } from "@codemirror/state";
import { EditorView, keymap, lineNumbers, highlightActiveLine } from "@codemirror/view";
import { defaultKeymap, history, historyKeymap, indentWithTab } from "@codemirror/commands";
import { defaultHighlightStyle, syntaxHighlighting } from "@codemirror/language";
import { yaml } from "@codemirror/lang-yaml";
import { lintGutter, setDiagnostics, type Diagnostic } from "@codemirror/lint";
import { didYouMean } from "../lib/piecegraph";

export interface Fault {
  line: number;
  col: number;
  field?: string;
  message: string;
}

// faultRange is the text a validator fault points at: from its line:col
// (1-based) to the end of the word there.
function faultRange(state: EditorState, f: Fault): { from: number; to: number } {
  const line = state.doc.line(Math.min(Math.max(f.line, 1), state.doc.lines));
  const from = Math.min(line.from + Math.max(f.col - 1, 0), line.to);
  let to = from;
  const text = state.doc.sliceString(from, line.to);
  const word = /^[\w.\-"']+/.exec(text);
  to = from + (word ? word[0].length : 0);
  if (to === from) to = Math.min(from + 1, line.to);
  return { from, to };
}

// diagnostics turns the validator's faults into CodeMirror's, each "did
// you mean" offered as a quick fix replacing the word at fault.
function diagnostics(state: EditorState, faults: Fault[]): Diagnostic[] {
  return faults.map((f) => {
    const { from, to } = faultRange(state, f);
    const hint = didYouMean(f.message);
    return {
      from,
      to,
      severity: "error",
      message: `${f.line}:${f.col}: ${f.message}`,
      actions: hint
        ? [
            {
              name: `Use "${hint}"`,
              apply: (view: EditorView, from: number, to: number) => view.dispatch({ changes: { from, to, insert: hint } }),
            },
          ]
        : undefined,
    };
  });
}

// YamlEditor is a CodeMirror 6 editor for a piece's YAML, showing the
// validator's faults inline (underlined, in the gutter, with quick fixes).
export default function YamlEditor({
  value,
  onChange,
  faults,
  label,
  readOnly = false,
  focusRef,
}: {
  value: string;
  onChange: (v: string) => void;
  faults: Fault[];
  label: string;
  readOnly?: boolean;
  // focusRef is given a function that puts the focus in the editor.
  focusRef?: { current: (() => void) | null };
}) {
  const host = useRef<HTMLDivElement>(null);
  const view = useRef<EditorView | null>(null);
  if (focusRef) focusRef.current = () => view.current?.focus();
  const change = useRef(onChange);
  const clicked = useRef(false);
  // The documents handed up by onChange that have not come back as value.
  const emitted = useRef<string[]>([]);
  change.current = onChange;

  useEffect(() => {
    // The editor lives in a shadow root: CodeMirror's styles are then an
    // adopted (constructed) style sheet, which the app's Content Security
    // Policy (style-src 'self', no inline <style>) allows.
    const el = host.current!;
    const shadow = el.shadowRoot ?? el.attachShadow({ mode: "open" });
    shadow.replaceChildren();
    const parent = document.createElement("div");
    shadow.appendChild(parent);
    const v = new EditorView({
      parent,
      root: shadow,
      state: EditorState.create({
        doc: value,
        extensions: [
          lineNumbers(),
          highlightActiveLine(),
          history(),
          keymap.of([...defaultKeymap, ...historyKeymap, indentWithTab]),
          // Tab indents, but not before a key is typed in the editor:
          // reached with Tab, the editor let no Tab through, and a keyboard
          // user going past it indented the piece's first line (a trap
          // that edits). Until another key (or after Escape), Tab and
          // Shift+Tab move the focus on. A click to edit is not Tab.
          EditorView.domEventHandlers({
            mousedown: () => {
              clicked.current = true;
            },
            focus: (_e, v) => {
              if (!clicked.current) v.setTabFocusMode(1e12);
              clicked.current = false;
            },
          }),
          syntaxHighlighting(defaultHighlightStyle),
          yaml(),
          lintGutter(),
          // Long lines wrap: the editor never scrolls sideways (on a phone
          // the studio's editor is ~300 px wide, and a region that scrolls
          // sideways must be reachable by keyboard).
          EditorView.lineWrapping,
          EditorState.readOnly.of(readOnly),
          EditorView.theme({
            "&": { maxHeight: "36rem", fontSize: "13px", backgroundColor: "#fff" },
            ".cm-scroller": { overflow: "auto", fontFamily: "ui-monospace, SFMono-Regular, Menlo, monospace" },
          }),
          // A piece taller than the editor (any built-in one) scrolls: its
          // content says it is focusable (tabindex; contenteditable alone
          // is not, to axe), so the scrolling region is reachable by
          // keyboard, read-only too.
          EditorView.contentAttributes.of({
            "aria-label": label,
            "aria-description": "Tab moves past the editor until you type in it, then indents; Escape, then Tab, moves on.",
            "data-testid": "piece-editor-content",
            tabindex: "0",
          }),
          EditorView.updateListener.of((u) => {
            if (!u.docChanged) return;
            const doc = u.state.doc.toString();
            emitted.current.push(doc);
            change.current(doc);
          }),
        ],
      }),
    });
    view.current = v;
    return () => v.destroy();
    // The editor is created once; value changes from outside are applied below.
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [readOnly, label]);

  // A value set from outside (loading a version, the conflict view)
  // replaces the document. A value the editor itself handed up is not from
  // outside: it may be older than the document by the time it comes back
  // (an edit made before the page drew the previous one), and it replaced
  // the document, undoing that edit (a paste right after a key was lost).
  useEffect(() => {
    const v = view.current;
    const mine = emitted.current.lastIndexOf(value);
    if (mine >= 0) {
      emitted.current.splice(0, mine + 1);
      return;
    }
    emitted.current = [];
    if (v && v.state.doc.toString() !== value) v.dispatch({ changes: { from: 0, to: v.state.doc.length, insert: value } });
  }, [value]);

  useEffect(() => {
    const v = view.current;
    if (v) v.dispatch(setDiagnostics(v.state, diagnostics(v.state, faults)));
  }, [faults, value]);

  return (
    <>
      {/* Focused, it shows the app's focus ring: CodeMirror's own (a dotted
          line at its edge) was cut by the rounded box, and an editor reached
          with Tab looked no different. */}
      <div
        ref={host}
        data-testid="piece-editor"
        className="overflow-hidden rounded border border-slate-300 text-sm focus-within:outline-2 focus-within:outline-offset-2 focus-within:outline-sky-600 dark:border-slate-600 dark:focus-within:outline-sky-400"
      />
      <p className="mt-1 text-xs text-slate-600 dark:text-slate-400" data-testid="piece-editor-keys">
        Tab moves past the editor until you type in it, then indents; Esc, then Tab, moves on.
      </p>
    </>
  );
}
