package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/maestro-run/maestro/internal/agent"
	"github.com/maestro-run/maestro/internal/agentcli"
	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/protocol"
)

// AgentCLI runs a headless session's prompts on an agent CLI (Claude
// Code, Codex, …; internal/agentcli) instead of Maestro's own agent loop.
// Wire it with Config.Turn = a.Turn, Config.ProviderName = a.ProviderName()
// and Config.Model = a.ModelName(); it needs no llm.Provider.
//
// Each prompt starts the CLI once through the executor; its parsed events
// are published as the same protocol messages the own loop emits
// (response_start/chunk/end with usage, tool_call/start/output/end,
// status, error). The CLI's session id is kept and resumed at the next
// prompt, and handed to OnSession so that a restarted process can resume
// it too (SessionID, with History for the case the CLI lost it). An
// interrupt cancels the run: the executor SIGTERMs the CLI's
// process group and SIGKILLs it after its grace period (1 s by default).
// Failures are published as errors whose message starts with the
// agentcli category ("auth_expired: …").
//
// When the CLI can relay permission prompts over stdio (Claude Code), its
// tool permission requests become approval server requests, decided by the
// approval mode as for the own loop: auto allows, fail denies, prompt asks
// the client (timeout: denied).
type AgentCLI struct {
	// Executor runs the CLI (its Permission field is set per prompt).
	Executor *agentcli.Executor
	// Dir is the CLI's working directory.
	Dir string
	// Model is passed to the CLI verbatim ("" keeps its default).
	Model string
	// Permission is the run's permission level (default edit); the relay
	// is used only at edit.
	Permission agentcli.Permission
	// SessionID is the CLI session the first prompt resumes ("" starts a
	// new one).
	SessionID string
	// History is the conversation of a resumed Maestro session (its logged
	// prompts and answers). It seeds the transcript a fresh CLI session
	// starts from when the CLI no longer has SessionID.
	History []llm.Message
	// OnSession, when set, is called with the CLI session id each time it
	// changes (from the CLI's events or its result), so that the caller can
	// store it for a resume after a restart; "" when the CLI has no session
	// by the id resumed (session_not_found), which is then no session to
	// resume. It runs on the CLI's event path, once per new id: keep it
	// short (writing a small file is fine).
	OnSession func(id string)

	mu         sync.Mutex
	session    string
	started    bool
	announced  string
	transcript strings.Builder
}

// Session returns the CLI session the next prompt resumes.
func (a *AgentCLI) Session() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.started {
		return a.SessionID
	}
	return a.session
}

// ProviderName names the CLI in ready: the adapter id.
func (a *AgentCLI) ProviderName() string { return a.Executor.Def.ID }

// ModelName is the model ready reports: Model, or "default" when the CLI
// keeps its own.
func (a *AgentCLI) ModelName() string {
	if a.Model == "" {
		return "default"
	}
	return a.Model
}

// Turn runs one prompt on the CLI (a TurnFunc).
func (a *AgentCLI) Turn(ctx context.Context, t *Turn, m protocol.Prompt) error {
	r := t.r
	def := a.Executor.Def
	prompt, images := a.attachments(r, m)

	r.mu.Lock()
	system := r.cfg.System
	if r.sysBase != nil {
		system = *r.sysBase
	}
	for _, s := range r.sysAppends {
		if system != "" {
			system += "\n\n"
		}
		system += s
	}
	r.mu.Unlock()

	a.mu.Lock()
	if !a.started {
		a.started, a.session = true, a.SessionID
		writeTranscript(&a.transcript, a.History)
	}
	inv := agentcli.Invocation{Prompt: prompt, SessionID: a.session, Model: a.Model, Dir: a.Dir,
		Images: images, SystemPrompt: system, Permission: a.Permission}
	transcript := a.transcript.String()
	a.mu.Unlock()

	x := *a.Executor
	x.Permission = nil
	asked := &askedCalls{ids: map[string]bool{}}
	if a.Permission.Level() == agentcli.PermissionEdit && agentcli.RelaySupported(def) {
		x.Permission = a.permission(t, asked)
	}
	r.logMessage(llm.UserText(m.Content))
	raw := r.anyRawEvents()
	res, err := x.Run(ctx, agentcli.Request{Invocation: inv, Transcript: transcript}, func(ev agentcli.Event) {
		if raw && len(ev.Raw) > 0 && json.Valid(ev.Raw) {
			t.Publish(protocol.RawAgentEvent{EventType: def.ID, Event: json.RawMessage(ev.Raw)})
		}
		if ev.SessionID != "" {
			a.announce(t, ev.SessionID)
			a.setSession(ev.SessionID)
		}
		// A failure classified from the CLI's exit ends the turn unless
		// the CLI is started again (a lost session seeded afresh): held
		// as a last response_end is.
		exited := ev.Error != nil && ev.Error.Source != "stream"
		for _, msg := range ev.Messages {
			if end, ok := msg.(protocol.ToolEnd); ok && asked.has(end.CallID) {
				end.ApprovalRequestID = end.CallID
				msg = end
			}
			if _, failed := msg.(protocol.Error); failed && exited {
				t.publishHeld(msg)
				continue
			}
			t.Publish(msg)
		}
	})
	if res != nil {
		switch {
		case res.Err != nil && res.Err.Category == agentcli.SessionNotFound && res.SessionID == inv.SessionID:
			// The CLI has no session by the id resumed (one given as is,
			// with no conversation to seed a fresh one): no session to
			// keep, and the next prompt starts a new one.
			a.setSession("")
		case res.SessionID != "":
			a.setSession(res.SessionID)
		}
		said := []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{llm.Text(m.Content)}}}
		if res.Result != nil && res.Result.Text != "" {
			said = append(said, llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{llm.Text(res.Result.Text)}})
			r.logMessage(said[1])
		}
		a.mu.Lock()
		writeTranscript(&a.transcript, said)
		a.mu.Unlock()
		if res.Warning != "" {
			t.Publish(protocol.Status{Message: res.Warning})
		}
	}
	switch {
	case (errors.Is(err, agentcli.ErrInterrupted) || ctx.Err() != nil) && (res == nil || res.Result == nil || res.Result.IsError):
		// As the own loop reports an interrupted run (not one whose
		// answer arrived before the CLI had exited; a failed result is
		// none, and the turn ended as a success).
		t.PublishLast(protocol.Error{Message: "Operation aborted: the run was interrupted", ErrorType: protocol.ErrorCancelled})
		return published{fmt.Errorf("agent CLI %s: %w", def.ID, agent.ErrCancelled)}
	case err != nil && !errors.Is(err, agentcli.ErrInterrupted):
		return fmt.Errorf("agent CLI %s: %w", def.ID, err)
	case err == nil && res != nil && res.Err != nil:
		// The executor published the classified failure as an error.
		return published{fmt.Errorf("%s: %w", def.ID, res.Err)}
	case err == nil && res != nil && len(res.Denials) > 0:
		// The CLI refused tool calls under its permission mode (each has
		// its tool_end and status line): the task may be undone, so the
		// turn fails loudly instead of ending as a success.
		e := deniedError(def, res.Denials)
		t.PublishLast(protocol.Error{Message: e.Error(), ErrorType: e.Category.ErrorType()})
		return published{fmt.Errorf("%s: %w", def.ID, e)}
	}
	return nil
}

// deniedError is the failure of a turn whose CLI refused tool calls under
// its permission mode.
func deniedError(def *agentcli.Definition, denials []agentcli.Denial) *agentcli.AgentError {
	var tools []string
	for _, d := range denials {
		if d.Tool != "" && !slices.Contains(tools, d.Tool) {
			tools = append(tools, d.Tool)
		}
	}
	level := denials[0].Permission
	hint := "--permission edit"
	if level != agentcli.PermissionReadOnly {
		hint = "--permission full"
	}
	return &agentcli.AgentError{Category: agentcli.PermissionDenied, Source: "stream", ExitCode: -1,
		Message: fmt.Sprintf("%s refused %d tool call(s) (%s) under --permission %s; the task may be incomplete (allow more with %s)",
			def.Name, len(denials), strings.Join(tools, ", "), level, hint)}
}

// published is an error the turn has already published as an error
// message: runTurn does not publish it again, and RunPrompt returns it (a
// local client's exit status).
type published struct{ error }

func (e published) Unwrap() error { return e.error }

// setSession makes id the CLI session the next prompt resumes, and tells
// OnSession when it changed.
func (a *AgentCLI) setSession(id string) {
	a.mu.Lock()
	changed := a.session != id
	a.session = id
	a.mu.Unlock()
	if changed && a.OnSession != nil {
		a.OnSession(id)
	}
}

// writeTranscript writes the text of a logged conversation as Turn keeps
// it ("User: …" / "Assistant: …" paragraphs).
func writeTranscript(b *strings.Builder, history []llm.Message) {
	for _, msg := range history {
		text := msg.TextContent()
		if text == "" {
			continue
		}
		switch msg.Role {
		case llm.RoleUser:
			fmt.Fprintf(b, "User: %s\n\n", text)
		case llm.RoleAssistant:
			fmt.Fprintf(b, "Assistant: %s\n\n", text)
		}
	}
}

// announce publishes the CLI's session id once per id (a client resumes
// the whole session with the Maestro session id of session_info; the CLI's
// id is for the CLI's own tools).
func (a *AgentCLI) announce(t *Turn, id string) {
	a.mu.Lock()
	seen := a.announced == id
	a.announced = id
	a.mu.Unlock()
	if !seen {
		t.Publish(protocol.Status{Message: fmt.Sprintf("%s session %s", a.Executor.Def.Name, id)})
		// Where an embedder finds the CLI's id (session_info's
		// agent_session_id extension, docs/protocol.md).
		info := t.r.sessionInfo()
		info.AgentSessionID = id
		t.Publish(info)
	}
}

// attachments loads the prompt's attachments as the own loop does (same
// limits and errors): text files are appended to the prompt, images are
// passed to the CLI by path when it takes images.
func (a *AgentCLI) attachments(r *Runtime, m protocol.Prompt) (string, []string) {
	prompt := m.Content
	var images []string
	loaded := 0
	for _, raw := range m.Attachments {
		parts := r.loadAttachments([]string{raw})
		if len(parts) == 0 {
			continue
		}
		p := parts[0]
		if p.Type == llm.PartImage {
			if !a.Executor.Def.Capabilities.ImageInput {
				r.publish(protocol.Error{Message: fmt.Sprintf("Unsupported attachment (%s takes no images): %s", a.Executor.Def.Name, raw), ErrorType: protocol.ErrorTool}, "")
				continue
			}
			images = append(images, r.hostPath(raw))
		} else {
			prompt += "\n\n" + p.Text
		}
		loaded++
	}
	if loaded > 0 {
		r.publish(protocol.Status{Message: fmt.Sprintf("Loaded %d attachment(s)", loaded)}, "")
	}
	return prompt, images
}

// hostPath resolves an attachment path as loadAttachments does.
func (r *Runtime) hostPath(p string) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		p = filepath.Join(r.cfg.Home, p[1:])
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(r.cfg.Cwd, p)
	}
	return p
}

// askedCalls are the tool calls of a turn that went through an approval
// request (their tool_end carries approval_request_id).
type askedCalls struct {
	mu  sync.Mutex
	ids map[string]bool
}

func (c *askedCalls) add(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ids[id] = true
}

func (c *askedCalls) has(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ids[id]
}

// permission turns the CLI's permission requests into approval server
// requests (wire contract §9), ids = the tool call's id.
func (a *AgentCLI) permission(t *Turn, asked *askedCalls) agentcli.PermissionFunc {
	return func(ctx context.Context, req agentcli.PermissionRequest) (agentcli.PermissionDecision, error) {
		switch t.r.approvalMode() {
		case protocol.ApprovalAuto:
			return agentcli.PermissionDecision{Allow: true}, nil
		case protocol.ApprovalFail:
			return agentcli.PermissionDecision{Message: "Denied by approval policy"}, nil
		}
		id := req.CallID
		if id == "" {
			id = req.RequestID
		}
		d := agent.Describe(req.Tool, req.Input)
		if req.DisplayName != "" {
			d.Name = req.DisplayName
		}
		reason := req.Description
		if reason == "" {
			reason = "Requires approval"
		}
		if req.BlockedPath != "" {
			reason += " (" + req.BlockedPath + " is outside the allowed directories)"
		}
		asked.add(id)
		o, err := t.raise(ctx, protocol.ServerRequest{
			RequestID: id, RequestType: protocol.RequestApproval, CallID: id, Tool: req.Tool,
			DisplayName: d.Name, SummaryLabel: d.Summary, ActionDescription: d.Action,
			Args: req.Input, Reason: reason,
		})
		if err != nil {
			return agentcli.PermissionDecision{}, err
		}
		return agentcli.PermissionDecision{Allow: o.approved, Message: o.reason}, nil
	}
}
