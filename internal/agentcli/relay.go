package agentcli

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/maestro-run/maestro/internal/protocol"
)

// The permission relay (Claude Code's SDK control protocol over stdio).
//
// A CLI whose definition has permission_relay_over_stdio and
// stream_json_input, and whose stream is Claude's stream-json, can ask its
// caller for permission instead of deciding alone. The executor then
// starts it with --input-format stream-json --permission-prompt-tool stdio,
// keeps stdin open, writes an initialize control request and the prompt as
// a user message, and answers each control_request of subtype
// can_use_tool with the caller's decision:
//
//	← {"type":"control_request","request_id":"R","request":{"subtype":"can_use_tool",
//	    "tool_name":"Bash","input":{…},"description":"…","tool_use_id":"toolu_…"}}
//	→ {"type":"control_response","response":{"subtype":"success","request_id":"R",
//	    "response":{"behavior":"allow","updatedInput":{…}}}}
//	→ … "response":{"behavior":"deny","message":"Denied by user"}
//
// stdin is closed once the turn's result line arrives, which ends the CLI.
// Fixtures: testdata/claude-code-2.1.330/permission-{allow,deny}.jsonl
// (stdout) and .stdin.jsonl (what Maestro wrote).

// relayArgs switch a claude-stream-json CLI to the stdio permission relay.
var relayArgs = []string{"--input-format", "stream-json", "--permission-prompt-tool", "stdio"}

// PermissionRequest is a CLI asking whether it may run a tool.
type PermissionRequest struct {
	// RequestID is the CLI's control request id.
	RequestID string
	// CallID is the tool call's id (tool_use_id), as on the tool_call
	// event; empty when the CLI does not say.
	CallID      string
	Tool        string
	DisplayName string
	// Input is the tool's arguments (a JSON object).
	Input json.RawMessage
	// Description is the CLI's own explanation of the call.
	Description string
	// BlockedPath is the path outside the allowed directories, if any.
	BlockedPath string
}

// PermissionDecision answers a PermissionRequest. A denial's Message is
// shown to the model as the tool's result.
type PermissionDecision struct {
	Allow   bool
	Message string
}

// PermissionFunc decides on one permission request. It may block (a human
// answers); an error (the run ends) leaves the request unanswered.
type PermissionFunc func(ctx context.Context, req PermissionRequest) (PermissionDecision, error)

// RelaySupported reports whether def can relay permission prompts over
// stdio (Executor.Permission is used only then).
func RelaySupported(def *Definition) bool {
	return def != nil && def.Capabilities.PermissionRelayOverStdio && def.Capabilities.StreamJSONInput &&
		def.Parser == "claude-stream-json"
}

// promptMark stands for the prompt while the argument vector is built.
const promptMark = "\x00maestro-prompt\x00"

// relayArgv builds the arguments of a relay run: the definition's usual
// vector without the prompt (which goes on stdin), plus relayArgs. It
// returns the prompt text as the definition would have delivered it (with
// an embedded system prompt, for instance).
func (d *Definition) relayArgv(inv Invocation) (args []string, prompt, warning string) {
	text := inv.Prompt
	inv.Prompt = promptMark
	inv.Images = nil
	all, warning := d.Argv(inv)
	at := -1
	for i, a := range all {
		if strings.Contains(a, promptMark) {
			at = i
		}
	}
	if at < 0 {
		return append(all, relayArgs...), text, warning
	}
	prompt = strings.Replace(all[at], promptMark, text, 1)
	from := at
	switch {
	case len(d.Args.Prompt) > 0:
		from = max(at-(len(d.Args.Prompt)-1), 0)
	case at > 0 && all[at-1] == "--":
		from = at - 1
	}
	args = append(append([]string(nil), all[:from]...), all[at+1:]...)
	return append(args, relayArgs...), prompt, warning
}

// relayLine is a control line on stdout.
type relayLine struct {
	Type      string `json:"type"`
	RequestID string `json:"request_id"`
	Request   struct {
		Subtype     string          `json:"subtype"`
		ToolName    string          `json:"tool_name"`
		DisplayName string          `json:"display_name"`
		Input       json.RawMessage `json:"input"`
		Description string          `json:"description"`
		BlockedPath string          `json:"blocked_path"`
		ToolUseID   string          `json:"tool_use_id"`
	} `json:"request"`
}

// userMessage is the stream-json input line carrying the prompt.
func userMessage(prompt string, images []string) ([]byte, error) {
	type source struct {
		Type      string `json:"type"`
		MediaType string `json:"media_type"`
		Data      string `json:"data"`
	}
	type block struct {
		Type   string  `json:"type"`
		Text   string  `json:"text,omitempty"`
		Source *source `json:"source,omitempty"`
	}
	var content []block
	for _, p := range images {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("image %s: %w", p, err)
		}
		mt := mime.TypeByExtension(strings.ToLower(filepath.Ext(p)))
		if i := strings.IndexByte(mt, ';'); i >= 0 {
			mt = mt[:i]
		}
		if !strings.HasPrefix(mt, "image/") {
			return nil, fmt.Errorf("image %s: expected a .png, .jpg, .gif or .webp file", p)
		}
		content = append(content, block{Type: "image", Source: &source{Type: "base64", MediaType: mt, Data: base64.StdEncoding.EncodeToString(data)}})
	}
	content = append(content, block{Type: "text", Text: prompt})
	return json.Marshal(map[string]any{"type": "user", "message": map[string]any{"role": "user", "content": content}})
}

// controlResponse is Maestro's answer to a control request.
func controlResponse(id string, resp any, errText string) []byte {
	r := map[string]any{"subtype": "success", "request_id": id, "response": resp}
	if errText != "" {
		r = map[string]any{"subtype": "error", "request_id": id, "error": errText}
	}
	b, _ := json.Marshal(map[string]any{"type": "control_response", "response": r})
	return b
}

// stdinWriter writes whole lines to the CLI's stdin, one at a time, and
// drops writes after close.
type stdinWriter struct {
	mu     sync.Mutex
	w      io.WriteCloser
	closed bool
}

func (s *stdinWriter) line(b []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("stdin already closed")
	}
	_, err := s.w.Write(append(b, '\n'))
	return err
}

func (s *stdinWriter) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		_ = s.w.Close()
	}
}

// runRelayOnce is runOnce for the permission relay: the prompt goes on
// stdin and permission requests are answered through x.Permission.
func (x *Executor) runRelayOnce(ctx context.Context, inv Invocation, sink func(Event)) (*RunResult, error) {
	def := x.Def
	args, prompt, warning := def.relayArgv(inv)
	msg, err := userMessage(prompt, inv.Images)
	if err != nil {
		return &RunResult{}, fmt.Errorf("start %s: %w", def.ID, err)
	}
	env := x.Env
	if env == nil {
		env = os.Environ()
	}
	env = def.Environ(env, inv)
	bin := x.Path
	if bin == "" {
		if bin, err = lookPath(def.Binary, envValue(env, "PATH")); err != nil {
			return &RunResult{}, fmt.Errorf("start %s: %w", def.ID, err)
		}
	}
	runCtx, cancelRun := context.WithCancel(ctx)
	defer cancelRun()
	cmd := exec.Command(bin, args...)
	cmd.Dir = inv.Dir
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	pipe, err := cmd.StdinPipe() // a pipe, never a file (a file makes Claude print nothing)
	if err != nil {
		return &RunResult{}, fmt.Errorf("start %s: %w", def.ID, err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return &RunResult{}, fmt.Errorf("start %s: %w", def.ID, err)
	}
	stderr := &tail{n: 64 << 10}
	cmd.Stderr = stderr
	cmd.WaitDelay = 2 * time.Second
	if err := cmd.Start(); err != nil {
		return &RunResult{}, fmt.Errorf("start %s: %w", def.ID, err)
	}
	stdin := &stdinWriter{w: pipe}
	defer stdin.close()
	done := make(chan struct{})
	killed := x.killOnCancel(runCtx, cmd.Process.Pid, done)

	p, err := NewParser(def.Parser, ParserOptions{Provider: def.ID, Classifier: NewClassifier(def)})
	if err != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		stdin.close()
		_ = cmd.Wait()
		close(done)
		killed.Wait()
		return &RunResult{}, err
	}
	// A CLI that dies at once closes its stdin: the write errors surface
	// as its exit status and stderr below.
	_ = stdin.line([]byte(`{"type":"control_request","request_id":"maestro-init","request":{"subtype":"initialize"}}`))
	_ = stdin.line(msg)

	var answers sync.WaitGroup
	res := &RunResult{Warning: warning}
	var streamErr *AgentError
	var lastLines tail
	lastLines.n = 4 << 10
	for ev, err := range Parse(stdout, p) {
		if err != nil {
			break
		}
		if ev.Raw != nil {
			_, _ = lastLines.Write(append(ev.Raw, '\n'))
			if bytes.Contains(ev.Raw, []byte(`"control_request"`)) {
				x.answerControl(runCtx, ev.Raw, stdin, &answers)
			}
		}
		if ev.Error != nil && streamErr == nil {
			streamErr = ev.Error
		}
		if r := ev.Retry; r != nil && (r.Status == 401 || r.Status == 403) && streamErr == nil {
			streamErr = NewClassifier(def).Classify(r.Message, r.Status)
			ev.Error = streamErr
			ev.Messages = append(ev.Messages, protocol.Error{Message: streamErr.Error(), ErrorType: streamErr.Category.ErrorType()})
			sink(ev)
			cancelRun()
			continue
		}
		sink(ev)
		if ev.Result != nil {
			// One prompt per process: end of input ends the CLI.
			stdin.close()
		}
	}
	stdin.close()
	_, _ = io.Copy(io.Discard, stdout)
	waitErr := cmd.Wait()
	close(done)
	killed.Wait()
	cancelRun()
	answers.Wait()

	res.SessionID, res.Result, res.Stats = p.SessionID(), p.Result(), p.Stats()
	if res.SessionID == "" {
		res.SessionID = inv.SessionID
	}
	res.ExitCode = cmd.ProcessState.ExitCode()
	if ctx.Err() != nil {
		res.Err = &AgentError{Category: Unknown, Message: "interrupted", Source: "exit", ExitCode: res.ExitCode}
		return res, ErrInterrupted
	}
	switch {
	case streamErr != nil:
		streamErr.ExitCode = res.ExitCode
		res.Err = streamErr
	case waitErr != nil || res.ExitCode != 0:
		res.Err = NewClassifier(def).ClassifyExit(res.ExitCode, stderr.String(), lastLines.String())
	case res.Result == nil && p.Stats().Events == 0 && strings.TrimSpace(stderr.String()) != "":
		res.Err = NewClassifier(def).ClassifyExit(0, stderr.String(), "")
	}
	if res.Err != nil && res.Err.Source != "stream" {
		sink(Event{Error: res.Err, Messages: []protocol.Message{protocol.Error{Message: res.Err.Error(), ErrorType: res.Err.Category.ErrorType()}}})
	}
	return res, nil
}

// answerControl answers one control request line in the background (the
// stream keeps being read while a human decides). Requests other than
// can_use_tool get an error response.
func (x *Executor) answerControl(ctx context.Context, raw []byte, stdin *stdinWriter, wg *sync.WaitGroup) {
	var l relayLine
	if json.Unmarshal(raw, &l) != nil || l.Type != "control_request" || l.RequestID == "" {
		return
	}
	if l.Request.Subtype != "can_use_tool" {
		_ = stdin.line(controlResponse(l.RequestID, nil, "unsupported control request "+l.Request.Subtype))
		return
	}
	input := l.Request.Input
	if len(input) == 0 || !json.Valid(input) {
		input = json.RawMessage("{}")
	}
	req := PermissionRequest{RequestID: l.RequestID, CallID: l.Request.ToolUseID, Tool: l.Request.ToolName,
		DisplayName: l.Request.DisplayName, Input: input, Description: l.Request.Description, BlockedPath: l.Request.BlockedPath}
	wg.Go(func() {
		d, err := x.Permission(ctx, req)
		if err != nil || ctx.Err() != nil {
			return // the run is ending; the CLI is being stopped
		}
		var resp any
		if d.Allow {
			resp = map[string]any{"behavior": "allow", "updatedInput": req.Input}
		} else {
			m := d.Message
			if m == "" {
				m = "Denied by user"
			}
			resp = map[string]any{"behavior": "deny", "message": m}
		}
		_ = stdin.line(controlResponse(req.RequestID, resp, ""))
	})
}

// killOnCancel SIGTERMs the process group pgid when ctx ends and SIGKILLs
// it after the grace period, unless done closes first. Wait on the result
// after closing done.
func (x *Executor) killOnCancel(ctx context.Context, pgid int, done <-chan struct{}) *sync.WaitGroup {
	grace := x.KillGrace
	if grace <= 0 {
		grace = time.Second
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		select {
		case <-done:
			return
		case <-ctx.Done():
		}
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
		}
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	})
	return &wg
}
