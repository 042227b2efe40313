package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/maestro-run/maestro/internal/agent"
	"github.com/maestro-run/maestro/internal/agentcli"
	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/oneline"
	"github.com/maestro-run/maestro/internal/piece"
	"github.com/maestro-run/maestro/internal/protocol"
)

// AgentRunner gives the engine the agent CLIs that movements naming an
// `agent:` run on (Config.Agents). Nil in Config means such a movement
// fails the run with ErrAgentCLI.
type AgentRunner interface {
	// AgentCLI returns the CLI of adapter id, ready to run; an error says
	// why it cannot run (unknown adapter, binary not installed).
	AgentCLI(ctx context.Context, id string) (*AgentCLI, error)
}

// AgentRunnerFunc adapts a function to an AgentRunner.
type AgentRunnerFunc func(ctx context.Context, id string) (*AgentCLI, error)

// AgentCLI calls f.
func (f AgentRunnerFunc) AgentCLI(ctx context.Context, id string) (*AgentCLI, error) {
	return f(ctx, id)
}

// RegistryAgents is the usual AgentRunner: the adapters of reg, each
// binary looked up on path (the PATH list), run with env (nil: the
// process environment). model is passed to the CLI only when it has the
// form "<adapter id>/<model>". Movements run at the default permission
// level (see RegistryAgentsAt).
func RegistryAgents(reg *agentcli.Registry, path string, env []string, model string) AgentRunner {
	return RegistryAgentsAt(reg, path, env, model, agentcli.PermissionDefault)
}

// RegistryAgentsAt is RegistryAgents whose movements that may change files
// run at the permission level (--permission, config agent_permission);
// read-only movements, and every movement when level is read-only, run
// read-only.
func RegistryAgentsAt(reg *agentcli.Registry, path string, env []string, model string, level agentcli.Permission) AgentRunner {
	return AgentRunnerFunc(func(_ context.Context, id string) (*AgentCLI, error) {
		def, ok := reg.Get(id)
		if !ok {
			return nil, fmt.Errorf("unknown agent (known: %s; add your own in ~/.maestro/agents/)", strings.Join(reg.IDs(), ", "))
		}
		bin, err := def.Resolve(path)
		if err != nil {
			return nil, fmt.Errorf("%w (install it, or see maestro agents list)", err)
		}
		cli := &AgentCLI{Executor: &agentcli.Executor{Def: def, Path: bin, Env: env}, Base: agentcli.Invocation{Permission: level}}
		if m, ok := strings.CutPrefix(model, def.ID+"/"); ok {
			cli.Base.Model = m
		}
		return cli, nil
	})
}

// AgentCLI is one agent CLI as a movement executor.
type AgentCLI struct {
	// Executor runs the CLI (its Def, binary path and base environment).
	Executor *agentcli.Executor
	// Base is the invocation template: its Model, ExtraDirs, ExtraArgs and
	// Env are used for every movement, its Permission for every movement
	// that may edit (read-only ones always get agentcli.PermissionReadOnly,
	// and a read-only Permission makes every movement read-only); the
	// engine sets the prompt, the
	// session, the working directory and the system prompt.
	Base agentcli.Invocation
}

// AgentSessionsFile holds, in the run directory, the agent CLI session of
// each agent movement entry (see agentSession).
const AgentSessionsFile = "logs/agent-sessions.json"

// agentSession is what the engine remembers of an agent movement's CLI
// session, so that a movement continued after the user's answer or a
// restart resumes the same CLI conversation.
type agentSession struct {
	Movement string `json:"movement"`
	// Number is the run's movement count when the session ran: a later
	// entry of the same movement (a transition back to it) starts afresh.
	Number    int    `json:"number"`
	Agent     string `json:"agent"`
	SessionID string `json:"session_id"`
	// Prompt is the prompt that started the session (the transcript that
	// seeds a fresh session when the CLI lost it).
	Prompt string `json:"prompt"`
	// Result is the CLI's last final message.
	Result string `json:"result,omitempty"`
	// Answers is how many answers the run held when the session last ran.
	Answers int `json:"answers"`
}

// Why the engine ended an agent movement itself.
const reasonNoTag = "the agent's final message has no valid [NEXT:…] or [STATUS:…] tag and matches no rule condition"

// errorRule matches the [ERROR] and [ERROR:<category>] marker that opens a
// failure rule's condition.
var errorRule = regexp.MustCompile(`^\s*\[(?i:error)(?:\s*:\s*([a-z_]+))?\s*\]`)

// resultTag matches the decision tags of an agent's final message.
var resultTag = regexp.MustCompile(`\[\s*(?i:(next|status))\s*:\s*([A-Za-z0-9_.-]+)\s*\]`)

// lessonTag matches a [LESSON: …] tag of an agent's final message.
var lessonTag = regexp.MustCompile(`\[\s*(?i:lesson)\s*:\s*([^\]]+)\]`)

// readOnlyMovement reports whether m may not change anything: no edit and
// none of the tools that write (Write, Edit, Bash). Such a movement runs in
// the CLI's read-only (plan) mode.
func readOnlyMovement(m *piece.Movement) bool {
	if m.Edit {
		return false
	}
	for _, t := range m.AllowedTools {
		if t == "Bash" || t == "Write" || t == "Edit" {
			return false
		}
	}
	return true
}

// runAgentMovement runs movement m on its agent CLI and turns the CLI's
// final result into the movement's decision (docs/engine.md, "Agent
// movements").
func (r *run) runAgentMovement(ctx context.Context, m *piece.Movement) (*decision, error) {
	st := r.st
	if r.cfg.Agents == nil {
		return nil, fmt.Errorf("%w: movement %s names the agent CLI %q and no agent runner is configured (engine.Config.Agents)", ErrAgentCLI, m.Name, m.Agent)
	}
	cli, err := r.cfg.Agents.AgentCLI(ctx, m.Agent)
	if err != nil {
		return nil, fmt.Errorf("%w: movement %s: agent %q: %v", ErrAgentCLI, m.Name, m.Agent, err)
	}
	if cli == nil || cli.Executor == nil || cli.Executor.Def == nil {
		return nil, fmt.Errorf("%w: movement %s: agent %q: the runner returned no executor", ErrAgentCLI, m.Name, m.Agent)
	}
	def := cli.Executor.Def
	r.emit(MovementStarted{Movement: m.Name, Number: st.Movements, MaxMovements: r.p.MaxMovements, Entry: st.Entry, Revisits: st.Revisits, Agent: m.Agent})

	inv := cli.Base
	inv.Dir = r.cfg.Workspace.Dir()
	inv.SystemPrompt = strings.TrimSpace(m.Persona)
	if readOnlyMovement(m) || inv.Permission.Level() == agentcli.PermissionReadOnly {
		inv.Permission = agentcli.PermissionReadOnly
		// Without capabilities.read_only_mode the gate refuses the run
		// (its error says so): it does not run with other permissions.
		if def.Capabilities.ReadOnlyMode && len(def.Args.ReadOnly) == 0 && len(def.ReadOnlyEnv) == 0 {
			r.status(fmt.Sprintf("Movement %s is read-only but %s has no read-only mode: it runs with the adapter's default permissions.", m.Name, def.Name))
		}
	}

	sessions, err := loadAgentSessions(r.e.run)
	if err != nil {
		return nil, err
	}
	req := agentcli.Request{}
	prev := r.resumableSession(sessions, m, def)
	if prev != nil {
		inv.SessionID = prev.SessionID
		inv.Prompt = r.agentContinuation(m, prev)
		req.Transcript = "Maestro's prompt:\n" + prev.Prompt
		if prev.Result != "" {
			req.Transcript += "\n\nYour reply:\n" + prev.Result
		}
	} else {
		inv.Prompt = r.agentPrompt(m)
		if id := r.resumeAtStart(m); id != "" {
			if !def.Capabilities.Resume || len(def.Args.Resume) == 0 {
				return nil, fmt.Errorf("%w: movement %s: agent %q cannot resume a session (its adapter has no resume), so the run cannot continue session %s", ErrAgentCLI, m.Name, m.Agent, id)
			}
			inv.SessionID = id
		}
	}
	req.Invocation = inv

	var toolsOK, toolsFailed int
	res, runErr := cli.Executor.Run(ctx, req, func(ev agentcli.Event) {
		for _, msg := range ev.Messages {
			if end, ok := msg.(protocol.ToolEnd); ok {
				if end.Success {
					toolsOK++
				} else {
					toolsFailed++
				}
			}
			r.cfg.Sink.Event(msg)
		}
	})
	if res == nil {
		res = &agentcli.RunResult{}
	}
	if res.Warning != "" {
		r.status(fmt.Sprintf("%s: %s", def.Name, res.Warning))
	}
	r.accountAgent(def, res, toolsOK, toolsFailed)
	if res.SessionID != "" {
		rec := agentSession{Movement: m.Name, Number: st.Movements, Agent: m.Agent, SessionID: res.SessionID, Prompt: inv.Prompt, Answers: len(st.Answers)}
		if prev != nil && prev.SessionID == res.SessionID && !res.Reseeded {
			rec.Prompt = prev.Prompt
		}
		if res.Result != nil {
			rec.Result = res.Result.Text
		}
		if err := saveAgentSessions(r.e.run, upsertSession(sessions, rec)); err != nil {
			return nil, err
		}
	}
	if runErr != nil {
		if errors.Is(runErr, agentcli.ErrInterrupted) || ctx.Err() != nil {
			// The session's log records the interruption, as the own
			// loop's does (the CLI's process group is stopped by now).
			r.cfg.Sink.Event(protocol.Error{Message: "Operation aborted: the run was interrupted", ErrorType: protocol.ErrorCancelled})
			return nil, fmt.Errorf("movement %s: agent %s: %w (%w)", m.Name, m.Agent, agent.ErrCancelled, runErr)
		}
		return nil, fmt.Errorf("movement %s: agent %s: %w", m.Name, m.Agent, runErr)
	}
	if fail := agentFailure(res); fail != nil {
		return r.agentFailed(m, def, fail), nil
	}
	return r.agentDecision(m, res.Result.Text), nil
}

// agentFailure is the failure of a CLI run, nil when it succeeded: a
// classified error, a result marked is_error, a non-zero exit, or no final
// result at all.
func agentFailure(res *agentcli.RunResult) *agentcli.AgentError {
	switch {
	case res.Err != nil:
		return res.Err
	case res.Result == nil:
		return &agentcli.AgentError{Category: agentcli.Unknown, Message: "the agent ended without a final result", ExitCode: res.ExitCode}
	case res.Result.IsError:
		msg := strings.TrimSpace(res.Result.Text)
		if msg == "" {
			msg = "the agent reported an error (" + res.Result.Subtype + ")"
		}
		return &agentcli.AgentError{Category: agentcli.Unknown, Message: msg, ExitCode: res.ExitCode}
	case res.ExitCode != 0:
		return &agentcli.AgentError{Category: agentcli.AgentCrashed, Message: fmt.Sprintf("the agent exited with code %d", res.ExitCode), ExitCode: res.ExitCode}
	}
	return nil
}

// agentFailed takes the movement's failure rule — the first rule whose
// condition starts with [ERROR] or [ERROR:<category>] of this failure — or
// aborts the run when it has none.
func (r *run) agentFailed(m *piece.Movement, def *agentcli.Definition, fail *agentcli.AgentError) *decision {
	why := fmt.Sprintf("agent %s failed (%s): %s", def.ID, fail.Category, oneline.Cut(fail.Message, 300))
	for _, rule := range m.Rules {
		g := errorRule.FindStringSubmatch(rule.Condition)
		if g == nil || (g[1] != "" && g[1] != string(fail.Category)) {
			continue
		}
		if rule.Next == piece.WaitSubtasks && r.subs.canWait() != "" {
			continue
		}
		summary := fmt.Sprintf("Movement %s ran on the agent CLI %s, which failed (%s): %s", m.Name, def.Name, fail.Category, strings.TrimSpace(fail.Message))
		return &decision{next: rule.Next, summary: summary, forced: true, reason: why}
	}
	return &decision{complete: true, status: statusAborted, forced: true, reason: why,
		result: fmt.Sprintf("The run was stopped: movement %s's %s, and the movement has no [ERROR] rule.", m.Name, why)}
}

// agentDecision chooses the movement's exit from the agent's final
// message: the last valid [NEXT:<target>] or [STATUS:<status>] tag, else
// the first rule whose condition appears in the message, else the
// default_next fallback.
func (r *run) agentDecision(m *piece.Movement, text string) *decision {
	next := agentTargets(m)
	var lessons []string
	for _, g := range lessonTag.FindAllStringSubmatch(text, -1) {
		lessons = append(lessons, strings.TrimSpace(g[1]))
	}
	clean := strings.TrimSpace(resultTag.ReplaceAllString(lessonTag.ReplaceAllString(text, ""), ""))
	if clean == "" {
		clean = fmt.Sprintf("(movement %s's agent gave no text)", m.Name)
	}
	var chosen *decision
	var ignored []string
	for _, g := range resultTag.FindAllStringSubmatch(text, -1) {
		var d *decision
		switch strings.ToLower(g[1]) {
		case "next":
			if slices.Contains(next, g[2]) && (g[2] != piece.WaitSubtasks || r.subs.canWait() == "") {
				d = &decision{next: g[2], summary: clean, lessons: lessons}
			}
		case "status":
			switch s := completeStatus(strings.ToLower(g[2])); s {
			case statusSuccess, statusAborted, statusNeedsInput:
				d = &decision{complete: true, status: s, result: clean}
			}
		}
		if d == nil {
			ignored = append(ignored, g[0])
			continue
		}
		chosen = d
	}
	if len(ignored) > 0 {
		r.status(fmt.Sprintf("Movement %s: ignored tags %s (targets: %s; statuses: success, aborted, needs_user_input).",
			m.Name, strings.Join(ignored, " "), strings.Join(next, ", ")))
	}
	if chosen != nil {
		return chosen
	}
	norm := normText(text)
	for _, rule := range m.Rules {
		if errorRule.MatchString(rule.Condition) {
			continue
		}
		c := strings.TrimRight(normText(rule.Condition), ".")
		if c == "" || !strings.Contains(norm, c) {
			continue
		}
		if rule.Next == piece.WaitSubtasks && r.subs.canWait() != "" {
			continue
		}
		return &decision{next: rule.Next, summary: clean, lessons: lessons}
	}
	last := llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{{Type: llm.PartText, Text: clean}}}
	return r.fallback(m, reasonNoTag, forcedSummary(m, []llm.Message{last}, reasonNoTag))
}

// agentTargets are the [NEXT:…] targets of m: its rules' targets, failure
// rules left out.
func agentTargets(m *piece.Movement) []string {
	var out []string
	for _, rule := range m.Rules {
		if !errorRule.MatchString(rule.Condition) && !slices.Contains(out, rule.Next) {
			out = append(out, rule.Next)
		}
	}
	return out
}

// normText lowercases s and collapses its whitespace.
func normText(s string) string { return strings.ToLower(strings.Join(strings.Fields(s), " ")) }

// accountAgent adds a CLI run's usage to the run's totals.
func (r *run) accountAgent(def *agentcli.Definition, res *agentcli.RunResult, toolsOK, toolsFailed int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.st
	st.ToolCalls += toolsOK + toolsFailed
	st.ToolFailures += toolsFailed
	if res.Result == nil {
		st.CostUnknown = true
		return
	}
	u := res.Result.Usage
	st.Usage.Add(llm.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CacheReadTokens: u.CacheReadTokens, CacheWriteTokens: u.CacheWriteTokens})
	st.ModelCalls += max(res.Result.NumTurns, 1)
	if def.Capabilities.CostTracking {
		st.CostUSD += res.Result.CostUSD
	} else {
		st.CostUnknown = true
	}
}

// resumableSession is the CLI session the current entry of m continues:
// only when the movement continues (the user's answer, a restart) in the
// same entry, on the same agent, and the CLI can resume.
func (r *run) resumableSession(sessions []agentSession, m *piece.Movement, def *agentcli.Definition) *agentSession {
	st := r.st
	if st.Entry != EntryAnswer && st.Entry != EntryRestart {
		return nil
	}
	if !def.Capabilities.Resume || len(def.Args.Resume) == 0 {
		return nil
	}
	for i := range sessions {
		s := &sessions[i]
		if s.Movement == m.Name && s.Number == st.Movements && s.Agent == m.Agent && s.SessionID != "" {
			return s
		}
	}
	return nil
}

// resumeAtStart is the CLI session (Config.ResumeAgentSession) the run's
// first movement resumes when it starts, or starts again before its CLI
// reported a session of its own: "" for any other movement.
func (r *run) resumeAtStart(m *piece.Movement) string {
	st := r.st
	if r.cfg.ResumeAgentSession == "" || st.Movements != 1 || m.Agent != r.cfg.Agent || (st.Entry != EntryStart && st.Entry != EntryRestart) {
		return ""
	}
	return r.cfg.ResumeAgentSession
}

// agentPrompt is the prompt of an agent movement entered afresh: the
// movement and its instruction, the briefing (task, answers, handoff,
// feedback, subtask results, restart note), lessons, loop warning, and how
// to end the movement.
func (r *run) agentPrompt(m *piece.Movement) string {
	st := r.st
	var b strings.Builder
	fmt.Fprintf(&b, "# Movement %s\n\nYou are running movement %q of the piece %q (movement %d of at most %d in this run), orchestrated by Maestro.\n\n## Instruction\n\n%s\n\n",
		m.Name, m.Name, r.p.Name, st.Movements, r.p.MaxMovements, strings.TrimSpace(m.Instruction))
	brief := r.briefing(m)
	if i := strings.LastIndex(brief, "\nCarry out this movement's instruction now"); i >= 0 {
		brief = brief[:i]
	}
	b.WriteString(strings.TrimSpace(brief) + "\n")
	r.mu.Lock()
	lessons, note := slices.Clone(st.Lessons), st.LoopNote
	r.mu.Unlock()
	if len(lessons) > 0 {
		b.WriteString("\n# Lessons from earlier movements of this run\n\n")
		for _, l := range lessons {
			fmt.Fprintf(&b, "- %s\n", l)
		}
	}
	if note != "" {
		fmt.Fprintf(&b, "\n# Warning\n\n%s\n", note)
	}
	fmt.Fprintf(&b, "\n# Workspace\n\nYou work in %s.", r.cfg.Workspace.Dir())
	if readOnlyMovement(m) {
		b.WriteString(" This movement is read-only: do not change any file.")
	}
	b.WriteString("\n\n")
	b.WriteString(r.agentEnding(m))
	return b.String()
}

// agentContinuation is the prompt that resumes an agent movement's CLI
// session: the user's answer to its question, or a restart note.
func (r *run) agentContinuation(m *piece.Movement, prev *agentSession) string {
	r.mu.Lock()
	answers := slices.Clone(r.st.Answers)
	r.mu.Unlock()
	var b strings.Builder
	var notes []Answer
	if prev.Answers < len(answers) {
		notes = answers[prev.Answers:]
	}
	answered := false
	for _, a := range notes {
		if a.Question != "" && a.Movement == m.Name {
			fmt.Fprintf(&b, "The user answered your question: %s\n\n", strings.TrimSpace(a.Answer))
			answered = true
		} else {
			fmt.Fprintf(&b, "Note from the user: %s\n\n", strings.TrimSpace(a.Answer))
		}
	}
	if !answered {
		b.WriteString("Maestro restarted this movement after its previous attempt was interrupted or failed")
		if r.restartReason != "" {
			fmt.Fprintf(&b, " (%s)", r.restartReason)
		}
		b.WriteString(". The workspace may hold partial work from that attempt: check before redoing it.\n\n")
	}
	b.WriteString("Continue movement " + m.Name + ".\n\n")
	b.WriteString(r.agentEnding(m))
	return b.String()
}

// agentEnding tells the agent how its final message ends the movement.
func (r *run) agentEnding(m *piece.Movement) string {
	var b strings.Builder
	b.WriteString("# Ending this movement\n\nWhen this movement's work is done, give your final message. It is handed to the next step, so say what you did, found and left open. " +
		"End it with exactly one tag on its own line:\n")
	for _, rule := range m.Rules {
		if errorRule.MatchString(rule.Condition) {
			continue
		}
		fmt.Fprintf(&b, "- `[NEXT:%s]` when %s\n", rule.Next, strings.TrimSpace(rule.Condition))
	}
	b.WriteString("- `[STATUS:success]` when the whole task is done: your message is the final answer the user sees\n" +
		"- `[STATUS:aborted]` when the task cannot be done: say why\n" +
		"- `[STATUS:needs_user_input]` when only the user can decide how to go on: your message is one precise question\n")
	fmt.Fprintf(&b, "Without a tag, Maestro looks for a rule's condition in your message; failing that, %s.\n", fallbackText(m))
	b.WriteString("You may add `[LESSON: …]` tags before it: short, reusable insights (conventions, commands that work, pitfalls) for every later movement.\n")
	return b.String()
}

// upsertSession replaces the record of the same movement entry, or adds rec.
func upsertSession(sessions []agentSession, rec agentSession) []agentSession {
	for i := range sessions {
		if sessions[i].Movement == rec.Movement && sessions[i].Number == rec.Number {
			sessions[i] = rec
			return sessions
		}
	}
	return append(sessions, rec)
}

// loadAgentSessions reads the run's agent sessions (none when the file does
// not exist).
func loadAgentSessions(run runPath) ([]agentSession, error) {
	where := filepath.Join(run.String(), AgentSessionsFile)
	d, err := run.open(path.Dir(AgentSessionsFile), false)
	var data []byte
	if err == nil {
		data, _, err = d.ReadFile(path.Base(AgentSessionsFile), nil, maxAgentSessionsFile)
		d.Close()
	}
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read agent sessions %s: %w", where, err)
	}
	var out []agentSession
	if err := strictJSON(data, &out); err != nil {
		return nil, fmt.Errorf("read agent sessions %s: %w", where, err)
	}
	return out, nil
}

// maxAgentSessionsFile bounds the agent sessions file read back.
const maxAgentSessionsFile = 16 << 20

// saveAgentSessions replaces the run's agent sessions file atomically.
func saveAgentSessions(run runPath, sessions []agentSession) error {
	data, err := json.MarshalIndent(sessions, "", "  ")
	if err != nil {
		return fmt.Errorf("write agent sessions: %w", err)
	}
	if err := run.writeFile(AgentSessionsFile, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("write agent sessions: %w", err)
	}
	return nil
}
