//go:build browser

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/maestro-run/maestro/internal/llm/llmtest"
)

// studioPiece is the piece the studio test edits: plan → answer, with
// the typo (answr) the validator names at line 13, col 15, or fixed, with
// a third movement check after answer.
func studioPiece(next string, check bool) string {
	src := `name: studio-demo
description: A piece the studio test edits.
max_movements: 5
initial_movement: plan
movements:
  - name: plan
    edit: false
    persona: You plan the work.
    instruction: Plan it.
    allowed_tools: [Read]
    rules:
      - condition: planned
        next: ` + next + `
  - name: answer
    edit: false
    persona: You answer.
    instruction: Answer the task.
    allowed_tools: [Read]
    rules: []
`
	if check {
		src = strings.Replace(src, "    rules: []\n", `    rules:
      - condition: answered
        next: check
  - name: check
    edit: true
    persona: You check the answer.
    instruction: Check it.
    allowed_tools: [Read, Grep]
    rules: []
`, 1)
	}
	return src
}

// editor is the JavaScript expression of the YAML editor's shadow root
// (CodeMirror lives in one: components/YamlEditor.tsx).
const editor = `document.querySelector('[data-testid="piece-editor"]')?.shadowRoot`

// replaceEditor replaces the YAML editor's text as a person would: select
// all (Ctrl+A), then paste the new text over it; marker is a line of the
// new text to wait for.
func (tb *tab) replaceEditor(text, marker string) {
	tb.t.Helper()
	tb.wait("the editor", editor+`?.querySelector(".cm-content")`)
	eval[chromedp.Void](tb, "focus the editor", editor+`.querySelector(".cm-content").focus()`)
	tb.run("select all", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		for _, typ := range []input.DispatchKeyEventType{input.DispatchKeyEventTypeRawKeyDown, input.DispatchKeyEventTypeKeyUp} {
			if _, err := cdp.Call(ctx, tg, input.DispatchKeyEvent, input.DispatchKeyEventParams{Type: typ, Modifiers: 2, // Ctrl
				Key: "a", Code: "KeyA", WindowsVirtualKeyCode: 65, NativeVirtualKeyCode: 65}); err != nil {
				return err
			}
		}
		return nil
	}))
	js, _ := json.Marshal(text)
	eval[chromedp.Void](tb, "paste", `(() => { const dt = new DataTransfer(); dt.setData("text/plain", `+string(js)+`);
		`+editor+`.querySelector(".cm-content").dispatchEvent(new ClipboardEvent("paste", {clipboardData: dt, bubbles: true, cancelable: true})); })()`)
	tb.wait("the editor holds the pasted text", editor+`.querySelector(".cm-content").innerText.includes(`+strconv.Quote(marker)+`)`)
	if n := eval[int](tb, "count the lines", editor+`.querySelectorAll(".cm-content .cm-line").length`); n != strings.Count(text, "\n")+1 {
		tb.t.Fatalf("the editor has %d lines after pasting, want %d", n, strings.Count(text, "\n")+1)
	}
}

// TestPieceStudio: a stored piece edited in the studio: an error shows
// inline at its line as you type, with the suggestion as a quick fix that
// repairs it; the fix validates, saving updates the graph; a save over
// someone else's newer version shows the conflict, and overwriting
// resolves it; after Save, overwriting and Discard changes the focus is
// in the editor; the diff compares with the previous version, or any
// version picked; "New from this" stores a copy, which is then deleted.
func TestPieceStudio(t *testing.T) {
	s := startServe(t, nil, "--workers", "0")
	s.api(t, "POST", "/api/v1/pieces", map[string]string{"yaml": studioPiece("answer", false)}, nil)

	tb := newTab(t, s.url)
	tb.open("/pieces", "piece-row")
	tb.wait("the catalog lists the stored piece and the built-ins",
		`document.querySelector('[data-testid="piece-row"][data-name="studio-demo"]') && document.querySelector('[data-testid="piece-row"][data-name="chat"]')`)
	tb.shots("pieces")

	tb.open("/pieces/studio-demo", "piece-graph")
	nodes := `[...document.querySelectorAll('[data-testid="piece-node"]')].map(n => n.dataset.name).join(",")`
	tb.wait("the graph shows plan and answer", nodes+` === "plan,answer"`)
	tb.wait("the editor shows the YAML", editor+`?.querySelector(".cm-content")?.innerText.includes("studio-demo")`)
	tb.click("piece-node", `[data-name="plan"]`)
	tb.wait("the movement panel shows plan", q("movement-name")+`?.innerText === "plan" && `+q("movement-tools")+`.innerText === "Read"`)

	// Tab goes into the editor and out of it, leaving the piece as it is
	// (the editor took every Tab as an indent: a keyboard user going past
	// it indented the first line and could not leave); once a key is
	// typed in the editor, Tab indents.
	firstLine := editor + `.querySelector(".cm-content .cm-line").innerText`
	inEditor := `document.activeElement === document.querySelector('[data-testid="piece-editor"]')`
	eval[chromedp.Void](tb, "focus the instruction before the editor", `document.querySelector('[aria-label="Instruction of plan"]').focus()`)
	tb.run("Tab into the editor", chromedp.KeyEvent(kb.Tab))
	tb.wait("the editor has the focus", inEditor)
	// It shows it: CodeMirror's dotted outline was cut by the editor's box.
	if ring := eval[string](tb, "the editor's focus ring", `(() => { const c = getComputedStyle(document.querySelector('[data-testid="piece-editor"]')); return c.outlineStyle + " " + c.outlineWidth; })()`); ring != "solid 2px" {
		t.Errorf("the editor, focused with Tab, has the outline %q, want the app's focus ring (solid 2px)", ring)
	}
	tb.run("Tab out of the editor", chromedp.KeyEvent(kb.Tab))
	if got := eval[string](tb, "where Tab went", `(() => { const a = document.activeElement; return (a === document.querySelector('[data-testid="piece-editor"]') ? "the editor" : a.dataset?.testid || a.tagName) + " | " + `+firstLine+`; })()`); got != "piece-diff-toggle | name: studio-demo" {
		t.Errorf("Tab in the editor: the focus and the first line are %q, want the diff toggle and the line unchanged", got)
	}
	tb.run("Shift+Tab back into the editor", chromedp.KeyEvent(kb.Tab, chromedp.KeyModifiers(chromedp.ModifierShift)))
	tb.wait("the editor has the focus again", inEditor)
	tb.run("a key, then Tab", chromedp.KeyEvent(kb.Home), chromedp.KeyEvent(kb.Tab))
	tb.wait("Tab indented the line", firstLine+` === "  name: studio-demo" && `+inEditor)

	// An error: the rule's next names no movement. It shows at its line
	// (13) in the list, underlined in the editor's line 13, with the
	// validator's suggestion offered.
	tb.replaceEditor(studioPiece("answr", false), "next: answr")
	tb.wait("the fault is listed at line 13", `[...document.querySelectorAll('[data-testid="piece-errors"] li')].some(li => li.dataset.line === "13" && li.innerText.startsWith("13:15:") && li.innerText.includes('did you mean "answer"'))`)
	tb.wait("the fault is underlined in line 13", `(() => { const l = `+editor+`.querySelectorAll(".cm-content .cm-line")[12]; return l && l.querySelector(".cm-lintRange-error") && l.innerText.includes("answr"); })()`)
	tb.wait("the gutter marks it", editor+`.querySelector(".cm-lint-marker-error")`)
	tb.shots("piece-error", "piece-errors")

	// The suggestion as a quick fix: hovering the underlined word opens
	// its tooltip; its action replaces the word, and the YAML validates.
	tb.hover("the underlined word", editor+`.querySelector(".cm-lintRange-error")`)
	tb.wait("the quick fix is offered", editor+`.querySelector(".cm-tooltip-lint .cm-diagnosticAction")?.innerText.includes('Use "answer"')`)
	eval[chromedp.Void](tb, "click the quick fix", editor+`.querySelector(".cm-tooltip-lint .cm-diagnosticAction").click()`)
	tb.wait("the quick fix replaced the word", `(() => { const l = `+editor+`.querySelectorAll(".cm-content .cm-line")[12]; return l && l.innerText.includes("next: answer") && !l.innerText.includes("answr"); })()`)
	tb.wait("the fixed YAML validates", q("piece-valid"))

	// The fix, with a third movement: valid; saved; the graph has it.
	tb.replaceEditor(studioPiece("answer", true), "  - name: check")
	tb.wait("the fixed YAML validates", q("piece-valid"))
	tb.wait("the preview graph shows check", nodes+` === "plan,answer,check"`)
	tb.clickEnabled("piece-save")
	tb.wait("saved as version 2", q("piece-saved")+`?.innerText === "Saved version 2."`)
	// Save is disabled once saved: the focus goes back to the editor (it
	// was left on <body>, the next Tab at the top of the window).
	focusInEditor := func(after string) {
		t.Helper()
		if got := eval[string](tb, "where the focus is", `(() => { const a = document.activeElement; return a === document.querySelector('[data-testid="piece-editor"]') ? "" : a === document.body || !a ? "<body>" : a.outerHTML.slice(0, 80); })()`); got != "" {
			t.Errorf("after %s the focus is on %s, not in the editor", after, got)
		}
	}
	focusInEditor("Save")
	var got struct {
		Version int64  `json:"version"`
		YAML    string `json:"yaml"`
	}
	s.api(t, "GET", "/api/v1/pieces/studio-demo", nil, &got)
	if got.Version != 2 || !strings.Contains(got.YAML, "name: check") {
		t.Fatalf("after save the server has version %d:\n%s", got.Version, got.YAML)
	}
	tb.open("/pieces/studio-demo", "piece-graph")
	tb.wait("the reloaded graph shows check", nodes+` === "plan,answer,check"`)
	tb.shots("piece-studio")

	// Someone else saves version 3; this page's save (on version 2)
	// conflicts and shows both; overwriting saves version 4.
	s.api(t, "PUT", "/api/v1/pieces/studio-demo", map[string]any{"yaml": strings.Replace(studioPiece("answer", true), "Plan it.", "Plan it well.", 1), "if_version": 2}, nil)
	tb.wait("the editor shows the YAML", editor+`?.querySelector(".cm-content")?.innerText.includes("Check it.")`)
	tb.replaceEditor(strings.Replace(studioPiece("answer", true), "Check it.", "Check it twice.", 1), "Check it twice.")
	tb.wait("the edit validates", q("piece-valid"))
	tb.clickEnabled("piece-save")
	tb.wait("the conflict shows", q("piece-conflict")+`?.innerText.includes("now version 3") && `+q("piece-conflict", ` [data-testid="piece-diff"]`)+`.innerText.includes("Plan it well.")`)
	tb.shots("piece-conflict", "piece-conflict")
	tb.click("conflict-overwrite")
	tb.wait("saved as version 4", q("piece-saved")+`?.innerText === "Saved version 4."`)
	focusInEditor("Overwrite with mine")
	// Discard changes goes once used: the editor, back to what is saved, has the focus.
	tb.replaceEditor(strings.Replace(studioPiece("answer", true), "Check it.", "Check it thrice.", 1), "Check it thrice.")
	tb.click("piece-discard")
	tb.wait("the edit is discarded", editor+`.querySelector(".cm-content").innerText.includes("Check it twice.") && !`+q("piece-discard"))
	focusInEditor("Discard changes")
	s.api(t, "GET", "/api/v1/pieces/studio-demo", nil, &got)
	if got.Version != 4 || !strings.Contains(got.YAML, "Check it twice.") {
		t.Errorf("after overwriting the server has version %d:\n%s", got.Version, got.YAML)
	}

	// The diff against an earlier version: by default the one before the
	// saved version 4 (3: "Plan it well.", "Check it."); version 2 picked
	// instead ("Plan it.", "Check it.").
	tb.click("piece-diff-toggle")
	diff := q("piece-diff") + `?.innerText`
	tb.wait("the diff against version 3", q("piece-diff", `[data-base="3"]`)+` && `+diff+`.includes("-     instruction: Plan it well.") && `+diff+`.includes("+     instruction: Check it twice.") && `+diff+`.includes("-     instruction: Check it.")`)
	if opts := eval[string](tb, "the versions offered", `[...document.querySelectorAll('[data-testid="piece-diff-base"] option')].map(o => o.value).join(",")`); opts != "4,3,2,1" {
		t.Errorf("the diff offers versions %q, want 4,3,2,1", opts)
	}
	tb.shots("piece-diff", "piece-diff")
	tb.selectValue(tid("piece-diff-base"), "2")
	tb.wait("the diff against version 2", q("piece-diff", `[data-base="2"]`)+` && `+diff+`.includes("+     instruction: Check it twice.") && !`+diff+`.includes("Plan it well.")`)

	// Run this piece: the new-task form with it chosen.
	tb.click("piece-run")
	tb.wait("the new-task form has the piece", q("new-task-piece")+`?.value === "studio-demo"`)

	// New from this: a copy under a new name, created at version 1;
	// then deleted, after a confirmation, and gone from the catalog.
	tb.open("/pieces/studio-demo", "piece-template")
	tb.click("piece-template")
	tb.wait("the template is loaded", q("piece-name")+`?.value === "studio-demo-copy" && `+editor+`?.querySelector(".cm-content")?.innerText.includes("name: studio-demo-copy")`)
	tb.fill(tid("piece-name"), "studio-copy")
	tb.wait("the copy validates", q("piece-valid"))
	tb.clickEnabled("piece-save")
	tb.wait("the copy is stored", `location.pathname === "/pieces/studio-copy" && `+q("piece-meta")+`?.innerText.includes("version 1")`)
	var copied struct {
		YAML string `json:"yaml"`
	}
	s.api(t, "GET", "/api/v1/pieces/studio-copy", nil, &copied)
	if !strings.Contains(copied.YAML, "name: studio-copy") || !strings.Contains(copied.YAML, "Check it twice.") {
		t.Errorf("the copy made from the template:\n%s", copied.YAML)
	}
	tb.click("piece-delete")
	tb.click("confirm-ok")
	tb.wait("the catalog without the copy", `location.pathname === "/pieces" && `+q("piece-row", `[data-name="studio-demo"]`)+` && !`+q("piece-row", `[data-name="studio-copy"]`))
	var list struct {
		Pieces []struct{ Name string } `json:"pieces"`
	}
	s.api(t, "GET", "/api/v1/pieces", nil, &list)
	for _, p := range list.Pieces {
		if p.Name == "studio-copy" {
			t.Errorf("the deleted piece is still listed by the API")
		}
	}
}

// hover moves the mouse over the middle of the element expr names (which
// may live in a shadow root).
func (tb *tab) hover(what, expr string) {
	tb.t.Helper()
	tb.wait(what, expr)
	pt := eval[[]float64](tb, "locate "+what, `(() => { const r = `+expr+`.getBoundingClientRect(); return [r.x + r.width/2, r.y + r.height/2]; })()`)
	tb.run("hover "+what, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, input.DispatchMouseEvent, input.DispatchMouseEventParams{Type: input.DispatchMouseEventTypeMouseMoved, X: pt[0], Y: pt[1]})
		return err
	}))
}

// TestUsageTotals: two tasks run on a priced model (the fake model
// server answering as openai/gpt-4.1); the usage page's total cost equals
// the sum of the tasks' costs in the task list, and its budget meter
// shows the configured monthly budget.
func TestUsageTotals(t *testing.T) {
	done := func(in, out int64) llmtest.Turn {
		return llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "call_" + strconv.FormatInt(in, 10), Name: "complete", Input: `{"status":"success","result":"done"}`}},
			InputTokens: in, OutputTokens: out}
	}
	model := llmtest.NewServer(t, done(100_000, 10_000), done(50_000, 5_000))
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte("budget_usd_month: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServeIn(t, home, []string{"MAESTRO_MODEL=openai/gpt-4.1", "OPENAI_API_KEY=x", "OPENAI_BASE_URL=" + model.URL() + "/v1"}, "--workers", "1")
	for _, title := range []string{"First", "Second"} {
		s.api(t, "POST", "/api/v1/tasks", map[string]any{"title": title, "piece": "chat"}, nil)
	}
	tb := newTab(t, s.url)
	tb.open("/", "task-row")
	tb.waitFor("both tasks succeed", `[...document.querySelectorAll('[data-testid="task-row"]')].filter(r => r.dataset.status === "succeeded").length === 2`, 2*stepTimeout)

	var list struct {
		Tasks []struct {
			JobCostUSD float64 `json:"job_cost_usd"`
		} `json:"tasks"`
	}
	s.api(t, "GET", "/api/v1/tasks", nil, &list)
	var sum float64
	for _, task := range list.Tasks {
		sum += task.JobCostUSD
	}
	// gpt-4.1: $2 per million input tokens, $8 per million output.
	if want := 0.2 + 0.08 + 0.1 + 0.04; math.Abs(sum-want) > 1e-9 {
		t.Fatalf("the tasks cost %v in all, want %v", sum, want)
	}

	tb.open("/usage", "usage-total-cost")
	usd := eval[string](tb, "the page's total", q("usage-total-cost")+`.dataset.usd`)
	total, err := strconv.ParseFloat(usd, 64)
	if err != nil || math.Abs(total-sum) > 1e-9 {
		t.Errorf("the usage page's total is %q, want the tasks' sum %v", usd, sum)
	}
	if shown := eval[string](tb, "the shown total", q("usage-total-cost")+`.innerText`); shown != fmt.Sprintf("$%.2f", sum) {
		t.Errorf("the usage page shows %q, want $%.2f", shown, sum)
	}
	tb.wait("the table and the top tasks", q("usage-table")+` && document.querySelectorAll('[data-testid="usage-top-tasks"] li').length === 2`)
	tb.wait("the budget meter", q("usage-budget")+`?.innerText.includes("of $1.00")`)
	tb.shots("usage")

	tb.selectValue(tid("usage-group"), "model")
	tb.wait("grouped by model", q("usage-table")+`?.innerText.includes("openai/gpt-4.1")`)
	var rep struct {
		Totals struct {
			CostUSD float64 `json:"cost_usd"`
		} `json:"totals"`
	}
	s.api(t, "GET", "/api/v1/usage", nil, &rep)
	if math.Abs(rep.Totals.CostUSD-sum) > 1e-9 {
		data, _ := json.Marshal(rep)
		t.Errorf("GET /api/v1/usage totals %s, want cost %v", data, sum)
	}
}
