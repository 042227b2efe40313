package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/maestro-run/maestro/internal/agent"
	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/piece"
	"github.com/maestro-run/maestro/internal/tool"
)

// Why the engine ended a movement itself (Transition.Reason, Handoff.Reason).
const (
	reasonReminders  = "no transition or complete after the reminders"
	reasonContext    = "the context window is full"
	reasonIterations = "the movement's model-call limit was reached"
	// reasonTextAnswer ends a movement with text_answer: result whose
	// model kept answering in text: its last answer is the result.
	reasonTextAnswer = "the model answered in text without calling complete; its last answer is the result (text_answer: result)"
)

// runMovement runs the current movement's agent loop until it decides.
func (r *run) runMovement(ctx context.Context) (*decision, error) {
	st := r.st
	m, ok := r.p.Movement(st.Movement)
	if !ok {
		return nil, fmt.Errorf("movement %q is not in piece %s", st.Movement, r.p.Name)
	}
	if r.cfg.Agent != "" && m.Agent != r.cfg.Agent {
		on := *m
		on.Agent = r.cfg.Agent
		m = &on
	}
	if m.Agent != "" {
		return r.runAgentMovement(ctx, m)
	}
	ctl := &movementCtl{}
	tools, omitted := r.movementTools(m, ctl)
	omitted = append(omitted, r.addMCPTools(ctx, m, tools, ctl)...)
	omitted = append(omitted, r.addSkillTool(ctx, m, tools, ctl)...)
	r.emit(MovementStarted{Movement: m.Name, Number: st.Movements, MaxMovements: r.p.MaxMovements, Entry: st.Entry, Revisits: st.Revisits, Tools: tools.Names()})
	if len(omitted) > 0 && r.noteOmitted(m.Name) {
		r.emit(ToolsOmitted{Movement: m.Name, Tools: omitted})
	}

	var history []llm.Message
	var input llm.Message
	switch {
	case st.Entry == EntryAnswer && len(st.Conversation) > 0:
		history, input = answerInput(st.Conversation, st.Answers[len(st.Answers)-1].Answer)
	case st.Entry == EntryRestart && len(st.Progress) > 0:
		history, input = r.progressInput()
	default:
		r.mu.Lock()
		st.FrameBase = st.ModelTurns
		r.mu.Unlock()
		input = llm.UserText(r.briefing(m))
	}
	// No save here: if the process dies before the movement decides, a
	// restart briefs the movement again from the last saved state (the
	// same handoff, feedback and subtask results).

	prov, err := r.movementProvider(ctx, m)
	if err != nil {
		return nil, err
	}
	needs := r.cfg.NeedsApproval
	if needs == nil {
		needs = func(t tool.Tool, _ llm.ToolCall) bool { return !t.ReadOnly() }
	}
	ag := agent.New(agent.Config{
		Provider:      atFrame(prov, st.FrameBase),
		Tools:         tools,
		System:        r.systemPrompt(m, tools),
		MaxIterations: r.cfg.MaxIterations,
		MaxTokens:     r.cfg.MaxTokens,
		Thinking:      r.cfg.Thinking,
		Approve:       r.cfg.Approve,
		NeedsApproval: func(t tool.Tool, call llm.ToolCall) bool {
			return !isControl(call.Name) && needs(t, call)
		},
		OnContext:     r.onContext(ctl, m.Name),
		ContextWindow: r.cfg.ContextWindow,
		Notices:       r.cfg.Notices,
		// Context pressure (70/85/95 %) ends a movement first; compaction
		// is the last line before failure: a request that would not fit
		// the window, or one the provider rejects as too long.
		CompactAt: 1,
	})

	sink := r.cfg.Sink
	var track *progressSink
	if r.cfg.KeepProgress {
		track = &progressSink{Sink: sink, r: r}
		sink = track
	}
	for reminders := 0; ; {
		track.begin(history)
		res, err := ag.Run(ctx, history, input, sink)
		history = llm.AppendHistory(history, res.Messages...)
		r.account(res)
		if d := ctl.decision(); d != nil {
			if d.complete && d.status == statusNeedsInput {
				d.conversation = history
			}
			return d, nil
		}
		if ctl.isForced() {
			return r.fallback(m, reasonContext, forcedSummary(m, history, reasonContext)), nil
		}
		if err != nil {
			if errors.Is(err, agent.ErrMaxIterations) {
				return r.fallback(m, reasonIterations, forcedSummary(m, history, reasonIterations)), nil
			}
			return nil, fmt.Errorf("movement %s: %w", m.Name, err)
		}
		if reminders == r.cfg.Reminders {
			if text := lastText(history); text != "" && m.TextAnswer == piece.TextAnswerResult {
				return &decision{complete: true, status: statusSuccess, forced: true, reason: reasonTextAnswer, result: text}, nil
			}
			return r.fallback(m, reasonReminders, forcedSummary(m, history, reasonReminders)), nil
		}
		reminders++
		r.emit(Reminder{Movement: m.Name, Count: reminders, Max: r.cfg.Reminders})
		input = llm.UserText(r.reminder(m, reminders, ctl.takeNotes()))
	}
}

// movementProvider is the model m runs on: the one it or its piece names
// (Config.Models), else the run's. A replay run plays its script.
func (r *run) movementProvider(ctx context.Context, m *piece.Movement) (llm.Provider, error) {
	spec := r.p.ModelFor(m)
	if spec == "" || isReplay(r.cfg.Provider) {
		return r.cfg.Provider, nil
	}
	if p, ok := r.models[spec]; ok {
		return p, nil
	}
	where := fmt.Sprintf("piece %s names", r.p.Name)
	if m.Model != "" {
		where = fmt.Sprintf("movement %s of piece %s names", m.Name, r.p.Name)
	}
	if r.cfg.Models == nil {
		return nil, fmt.Errorf("%s model %q, and this run cannot choose models", where, spec)
	}
	p, err := r.cfg.Models(ctx, spec)
	if err != nil {
		return nil, fmt.Errorf("%s model %q: %w", where, spec, err)
	}
	if r.models == nil {
		r.models = map[string]llm.Provider{}
	}
	r.models[spec] = p
	return p, nil
}

// noteOmitted reports whether the run has yet to say which of movement's
// tools it leaves out, and records that it now does.
func (r *run) noteOmitted(movement string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if slices.Contains(r.st.OmittedNoted, movement) {
		return false
	}
	r.st.OmittedNoted = append(r.st.OmittedNoted, movement)
	return true
}

// account adds an agent run's usage to the run's totals.
func (r *run) account(res agent.Result) {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.st
	st.Usage.Add(res.Usage)
	st.CostUSD += res.CostUSD
	st.CostUnknown = st.CostUnknown || !res.CostKnown
	st.ModelCalls += res.ModelCalls()
	st.ToolCalls += res.Tools.CallsSucceeded + res.Tools.CallsFailed
	st.ToolFailures += res.Tools.CallsFailed
	for _, m := range res.Messages {
		if m.Role == llm.RoleAssistant {
			st.ModelTurns++
		}
	}
}

// answerInput continues a conversation that ended with the model's
// complete(needs_user_input) call: the answer becomes that call's result.
func answerInput(conv []llm.Message, answer string) ([]llm.Message, llm.Message) {
	history := slices.Clone(conv[:len(conv)-1])
	last := conv[len(conv)-1]
	parts := slices.Clone(last.Parts)
	found := false
	for i, p := range parts {
		if p.Type == llm.PartToolResult && p.ToolResult != nil && p.ToolResult.Name == toolComplete {
			tr := *p.ToolResult
			tr.Content, tr.IsError = "The user answered: "+answer, false
			parts[i].ToolResult = &tr
			found = true
		}
	}
	if !found || last.Role != llm.RoleUser {
		return slices.Clone(conv), llm.UserText("The user answered your question: " + answer)
	}
	return history, llm.Message{Role: llm.RoleUser, Parts: parts}
}

// fallback is the engine's decision for a movement that did not decide:
// its default_next, or an abort when it has none.
func (r *run) fallback(m *piece.Movement, why, summary string) *decision {
	switch m.DefaultNext {
	case "":
		return &decision{complete: true, status: statusAborted, forced: true, reason: why,
			result: fmt.Sprintf("The run was stopped: movement %s ended without calling transition or complete (%s) and has no default_next.", m.Name, why)}
	case piece.Complete:
		return &decision{complete: true, status: statusSuccess, forced: true, reason: why, result: lastWords(summary)}
	case piece.Abort:
		return &decision{complete: true, status: statusAborted, forced: true, reason: why,
			result: fmt.Sprintf("The run was stopped in movement %s: %s.", m.Name, why)}
	case piece.Ask:
		return &decision{complete: true, status: statusNeedsInput, forced: true, reason: why,
			result: fmt.Sprintf("Movement %s stopped (%s) before it finished. %s\n\nHow should the run continue?", m.Name, why, summary)}
	}
	return &decision{next: m.DefaultNext, summary: summary, forced: true, reason: why}
}

// forcedSummary is the summary the engine hands over for a movement it
// ended: why, the model's last text, and the tools it called.
func forcedSummary(m *piece.Movement, history []llm.Message, why string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Maestro ended movement %s before it called transition: %s.", m.Name, why)
	last := lastText(history)
	counts := map[string]int{}
	var order []string
	for _, msg := range history {
		if msg.Role != llm.RoleAssistant {
			continue
		}
		for _, c := range msg.ToolCalls() {
			if counts[c.Name] == 0 {
				order = append(order, c.Name)
			}
			counts[c.Name]++
		}
	}
	if last != "" {
		if r := []rune(last); len(r) > 4000 {
			last = "…" + string(r[len(r)-4000:])
		}
		fmt.Fprintf(&b, "\n\nIts last message:\n%s", last)
	}
	if len(order) > 0 {
		parts := make([]string, len(order))
		for i, n := range order {
			parts[i] = fmt.Sprintf("%s ×%d", n, counts[n])
		}
		fmt.Fprintf(&b, "\n\nTools it called: %s.", strings.Join(parts, ", "))
	}
	return b.String()
}

// lastText is the model's last non-empty text answer in history, trimmed.
func lastText(history []llm.Message) string {
	for i := len(history) - 1; i >= 0; i-- {
		if msg := history[i]; msg.Role == llm.RoleAssistant {
			if t := strings.TrimSpace(msg.TextContent()); t != "" {
				return t
			}
		}
	}
	return ""
}

// lastWords extracts the model's last message from a forced summary, for
// a default_next of COMPLETE (a conversational movement whose plain answer
// is the result).
func lastWords(summary string) string {
	_, after, ok := strings.Cut(summary, "\n\nIts last message:\n")
	if !ok {
		return summary
	}
	before, _, _ := strings.Cut(after, "\n\nTools it called: ")
	return before
}

// onContext is the agent's OnContext hook: context pressure.
func (r *run) onContext(ctl *movementCtl, movement string) func(agent.ContextUsage) {
	return func(u agent.ContextUsage) {
		f := u.Fraction()
		level := 0
		switch {
		case f >= ContextForce:
			level = 3
		case f >= ContextPrompt:
			level = 2
		case f >= ContextWarn:
			level = 1
		}
		ctl.mu.Lock()
		if level <= ctl.level {
			ctl.mu.Unlock()
			return
		}
		ctl.level, ctl.usage = level, u
		pct := int(f * 100)
		ev := Pressure{Movement: movement, Source: PressureContext, Percent: pct, Tokens: u.Tokens, Window: u.Window}
		switch level {
		case 3:
			ctl.forced = true
			ev.Level = LevelForce
		case 2:
			ev.Level = LevelPrompt
			ctl.notes = append(ctl.notes, fmt.Sprintf("[Maestro] The context window is %d%% full (%d of %d tokens). Stop exploring: call transition now with a complete summary "+
				"of what you did, found and left open (the next movement starts with a fresh context and sees only your summary and the lessons), or call complete. "+
				"At %d%% Maestro ends this movement itself.", pct, u.Tokens, u.Window, int(ContextForce*100)))
		default:
			ev.Level = LevelWarn
			ctl.notes = append(ctl.notes, fmt.Sprintf("[Maestro] The context window is %d%% full (%d of %d tokens). Work economically: read only what you need "+
				"and plan to finish this movement soon.", pct, u.Tokens, u.Window))
		}
		ctl.mu.Unlock()
		r.emit(ev)
	}
}

// movementTools builds the tools offered to m: its allowed_tools that this
// build can offer (Write and Edit only with edit: true), each guarded, and
// the control tools. Entries it cannot offer are returned as omitted.
func (r *run) movementTools(m *piece.Movement, ctl *movementCtl) (*tool.Set, []OmittedTool) {
	set := tool.NewSet()
	var omitted []OmittedTool
	root := r.cfg.Workspace
	for _, name := range m.AllowedTools {
		var t tool.Tool
		reason := ""
		switch name {
		case toolTransition, toolComplete:
			continue // always offered below
		case "Read":
			t = tool.NewReadWith(root, r.cfg.FileLimits)
		case "Glob":
			t = tool.NewGlob(root)
		case "Grep":
			t = tool.NewGrep(root)
		case "Write", "Edit":
			if !m.Edit {
				reason = "needs edit: true"
			} else if name == "Write" {
				t = tool.NewWriteWith(root, r.cfg.FileLimits)
			} else {
				t = tool.NewEditWith(root, r.cfg.FileLimits)
			}
		case "Bash":
			if r.cfg.Sandbox == nil {
				reason = "no sandbox is configured"
			} else {
				t = tool.NewBash(r.cfg.Sandbox, root.Dir(), tool.BashOptions{AllowedCommands: m.AllowedCommands})
			}
		case "SpawnSubTask":
			t, reason = r.spawnTool(m)
		case "WebFetch", "DownloadFile", "WebSearch":
			t, reason = r.webTool(m.Name, name)
		case "SshExec", "SshUpload", "SshDownload":
			t, reason = r.sshTool(m, name)
		case "ReadToolDoc":
			t = tool.NewReadToolDoc()
		case "ReadSkill":
			if r.cfg.Skills != nil {
				continue // addSkillTool
			}
			reason = "no skills are configured"
		case "ListPieces", "GetPiece", "CreatePiece", "UpdatePiece":
			if r.cfg.Library == nil {
				reason = "no piece library is configured"
			} else {
				t = r.cfg.Library.tool(name)
			}
		default:
			if strings.HasPrefix(name, "mcp__") {
				if r.cfg.MCP != nil {
					continue // addMCPTools
				}
				reason = "MCP tools are not available in this build"
			} else {
				reason = "not available in this build"
			}
		}
		if t == nil {
			omitted = append(omitted, OmittedTool{Name: name, Reason: reason})
			continue
		}
		if _, dup := set.Get(name); !dup {
			set.Add(guarded{Tool: t, ctl: ctl})
		}
	}
	if len(m.Rules) > 0 {
		set.Add(newTransition(m, ctl, r.subs.canWait))
	}
	set.Add(newComplete(ctl))
	return set, omitted
}
