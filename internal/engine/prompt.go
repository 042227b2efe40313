package engine

import (
	"fmt"
	"strings"

	"github.com/maestro-run/maestro/internal/piece"
	"github.com/maestro-run/maestro/internal/tool"
)

// maxResultInContext caps one subtask result in a movement's briefing; the
// whole result is in its file.
const maxResultInContext = 8000

// systemPrompt is a movement's system prompt: persona, instruction, how the
// movement ends, the workspace, the run's lessons and any loop warning.
func (r *run) systemPrompt(m *piece.Movement, tools *tool.Set) string {
	st := r.st
	var b strings.Builder
	b.WriteString(strings.TrimSpace(m.Persona))
	fmt.Fprintf(&b, "\n\n# Movement %s\n\nYou are running movement %q of the piece %q (movement %d of at most %d in this run).\n\n## Instruction\n\n%s\n",
		m.Name, m.Name, r.p.Name, st.Movements, r.p.MaxMovements, strings.TrimSpace(m.Instruction))

	b.WriteString("\n## Ending this movement\n\nThis movement ends only when you call a control tool; a reply without one does not end it.\n")
	if len(m.Rules) > 0 {
		b.WriteString("- `transition` moves the run on. `next` is one of:\n")
		for _, rule := range m.Rules {
			fmt.Fprintf(&b, "  - `%s`: %s\n", rule.Next, strings.TrimSpace(rule.Condition))
		}
		if hasWaitRule(m.Rules) {
			b.WriteString("  (`WAIT_SUBTASKS` waits until every subtask you spawned has finished, then this movement continues with their results.)\n")
		}
		b.WriteString("  Give a `summary` with everything the next movement needs: it starts with a fresh context and sees only the task, your summary and the lessons. " +
			"Add `lessons`: short, reusable insights (conventions, commands that work, pitfalls) for every later movement.\n")
	}
	b.WriteString("- `complete` ends the run: status `success` (the result is the final answer, the only thing the user sees), " +
		"`aborted` (the result says why the task cannot be done) or `needs_user_input` (the result is one precise question; the run waits for the answer and continues here).\n")
	fmt.Fprintf(&b, "Call the control tool last, once this movement's work is done. If you reply without calling one, you are reminded up to %d times; then Maestro ends the movement for you and %s.\n",
		r.cfg.Reminders, fallbackText(m))

	b.WriteString("\n## Workspace\n\n")
	fmt.Fprintf(&b, "The workspace is %s; paths are relative to it.", r.cfg.Workspace.Dir())
	if r.e.jobLayout() {
		b.WriteString(" Uploads are under input/; deliverables go under output/ unless the task names another place; subtask results are under subtasks/.")
	}
	fmt.Fprintf(&b, "\nTools: %s.\n", strings.Join(tools.Names(), ", "))

	if len(st.Lessons) > 0 {
		b.WriteString("\n## Lessons from earlier movements of this run\n\n")
		for _, l := range st.Lessons {
			fmt.Fprintf(&b, "- %s\n", l)
		}
	}
	if st.LoopNote != "" {
		fmt.Fprintf(&b, "\n## Warning\n\n%s\n", st.LoopNote)
	}
	return b.String()
}

// hasWaitRule reports whether a rule targets WAIT_SUBTASKS.
func hasWaitRule(rules []piece.Rule) bool {
	for _, r := range rules {
		if r.Next == piece.WaitSubtasks {
			return true
		}
	}
	return false
}

// fallbackText says what happens when m does not decide.
func fallbackText(m *piece.Movement) string {
	if m.TextAnswer == piece.TextAnswerResult {
		return "the run completes with your last reply as its result"
	}
	switch m.DefaultNext {
	case "", piece.Abort:
		return "the run is aborted"
	case piece.Complete:
		return "the run completes with your last reply as its result"
	case piece.Ask:
		return "the user is asked how to continue"
	case piece.WaitSubtasks:
		return "the run waits for the subtasks"
	}
	return "the run moves to " + m.DefaultNext
}

// briefing is the first user message of a movement entered afresh: the
// task, the user's answers, the handoff or feedback it is owed, subtask
// results not yet delivered, and a restart note.
func (r *run) briefing(m *piece.Movement) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.st
	var b strings.Builder
	fmt.Fprintf(&b, "# Task\n\n%s\n", strings.TrimSpace(st.Task))
	if len(st.Answers) > 0 {
		b.WriteString("\n# The user's answers\n")
		for _, a := range st.Answers {
			if a.Question != "" {
				fmt.Fprintf(&b, "\nQuestion (from %s): %s\nAnswer: %s\n", a.Movement, a.Question, a.Answer)
			} else {
				fmt.Fprintf(&b, "\nNote from the user: %s\n", a.Answer)
			}
		}
	}
	h := st.Handoff
	if h != nil && h.To == m.Name {
		switch {
		case h.From == m.Name:
			b.WriteString("\n# Your summary before waiting for the subtasks\n\n")
		case h.Backward:
			fmt.Fprintf(&b, "\n# Feedback from %s\n\n%s sent the work back to this movement:\n\n", h.From, h.From)
		default:
			fmt.Fprintf(&b, "\n# Handoff from %s\n\n", h.From)
		}
		b.WriteString(strings.TrimSpace(h.Summary) + "\n")
	}
	if f := st.Feedback; f != nil && m.Edit {
		if !(h != nil && *f == *h && h.To == m.Name) {
			fmt.Fprintf(&b, "\n# Latest feedback from %s\n\n%s sent the work back to %s with this feedback; address it:\n\n%s\n", f.From, f.From, f.To, strings.TrimSpace(f.Summary))
		}
		st.Feedback = nil
	}
	var results []string
	for i := range st.Subtasks {
		s := &st.Subtasks[i]
		if s.Delivered || s.Status == StatusRunning {
			continue
		}
		s.Delivered = true
		res := s.Result
		if rs := []rune(res); len(rs) > maxResultInContext {
			res = string(rs[:maxResultInContext]) + "…"
		}
		results = append(results, fmt.Sprintf("## Subtask %d: %s (piece %s): %s\n\n%s\n\n(Full report: %s)\n", s.ID, s.Name, s.Piece, s.Status, strings.TrimSpace(res), s.File))
	}
	if len(results) > 0 {
		b.WriteString("\n# Subtask results\n\n" + strings.Join(results, "\n"))
	}
	if st.Entry == EntryRestart {
		b.WriteString("\n# Restart\n\nThis movement was started again after its previous attempt was interrupted or failed")
		if r.restartReason != "" {
			fmt.Fprintf(&b, " (%s)", r.restartReason)
		}
		b.WriteString(". The workspace may hold partial work from that attempt: check before redoing it.\n")
	}
	b.WriteString("\nCarry out this movement's instruction now, then end it with a control tool.")
	return b.String()
}

// reminder is the message sent after a reply without a control tool.
func (r *run) reminder(m *piece.Movement, k int, notes string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Reminder %d of %d: movement %s ends only through a tool call, and your last reply called none. ", k, r.cfg.Reminders, m.Name)
	if len(m.Rules) > 0 {
		fmt.Fprintf(&b, "If this movement's work is done, call transition (next: %s) with a summary, or complete with a status and a result; ", strings.Join(targets(m), ", "))
	} else {
		b.WriteString("If the work is done, call complete with a status and a result (your answer goes in the result); ")
	}
	b.WriteString("otherwise continue with the tools.")
	if k == r.cfg.Reminders {
		fmt.Fprintf(&b, " If you reply without a tool call again, Maestro ends the movement and %s.", fallbackText(m))
	}
	if notes != "" {
		b.WriteString("\n\n" + notes)
	}
	return b.String()
}
