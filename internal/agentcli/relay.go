package agentcli

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"os"
	"path/filepath"
	"strings"
	"sync"
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
	if inv.Permission.Level() == PermissionEdit {
		// The caller answers the prompts edit's arguments would pre-approve.
		inv.Permission = permissionRelay
	}
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
	for _, tok := range d.Args.Prompt {
		// An attached form ("--prompt={prompt}") is not part of the text.
		if before, _, ok := strings.Cut(tok, "{prompt}"); ok {
			prompt = strings.TrimPrefix(prompt, before)
		}
	}
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

// relayInit is the control request that opens a relay session.
const relayInit = `{"type":"control_request","request_id":"maestro-init","request":{"subtype":"initialize"}}`

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

func (s *stdinWriter) line(b []byte) error { return s.write(append(b, '\n')) }

// write writes b as it is.
func (s *stdinWriter) write(b []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("stdin already closed")
	}
	_, err := s.w.Write(b)
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
