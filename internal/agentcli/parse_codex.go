package agentcli

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"

	"github.com/maestro-run/maestro/internal/protocol"
)

// codexParser reads `codex exec --json` (ThreadEvent JSONL).
//
// Mapping: thread.started → session id; agent_message / reasoning items →
// response chunks (text / thinking); command_execution, file_change,
// mcp_tool_call and web_search items → tool_call, tool_start, tool_output
// (growth of aggregated_output), tool_end; todo_list / plan / error items →
// status; top-level error "Reconnecting… n/m" → status + Retry, other
// errors → structured error; turn.failed → structured error and an error
// Result; turn.completed → the open response ends with the usage delta
// (Codex reports the thread's running total; cached_input_tokens is a
// subset of input_tokens and is subtracted) and the Result, whose text is
// the last agent_message.
//
// Codex runs some shell calls without a command_execution item: a command
// its sandbox refuses early (it exits at once with a denial in its output)
// is returned to the model with no item on the stream, a race Codex loses
// about half the time under --sandbox read-only (openai/codex#47433, seen
// on 0.169.0). Its rollout records the call and its output. So, with
// ParserOptions.LookupShellCalls set, turn.completed is held until the end
// of the stream (Codex exits right after it, its rollout written), and the
// shell calls of the turn the rollout holds without an item are reported
// then (tool_call, tool_output, tool_end), right after the turn's
// response_end, whose tools summary counts them.
type codexParser struct {
	started   map[string]bool
	outputLen map[string]int
	lastText  string
	lastError string
	// shellItems counts the command_execution items of the stream.
	shellItems int
	// completed is the held turn.completed line.
	completed *codexLine
}

type codexItem struct {
	ID               string          `json:"id"`
	Type             string          `json:"type"`
	Text             string          `json:"text"`
	Command          string          `json:"command"`
	AggregatedOutput string          `json:"aggregated_output"`
	ExitCode         *int            `json:"exit_code"`
	Status           string          `json:"status"`
	Changes          json.RawMessage `json:"changes"`
	Server           string          `json:"server"`
	Tool             string          `json:"tool"`
	Arguments        json.RawMessage `json:"arguments"`
	Result           json.RawMessage `json:"result"`
	Error            *codexError     `json:"error"`
	Query            string          `json:"query"`
	Items            json.RawMessage `json:"items"`
	Message          string          `json:"message"`
}

type codexError struct {
	Message string `json:"message"`
}

type codexUsage struct {
	InputTokens           int64 `json:"input_tokens"`
	CachedInputTokens     int64 `json:"cached_input_tokens"`
	CacheWriteInputTokens int64 `json:"cache_write_input_tokens"`
	OutputTokens          int64 `json:"output_tokens"`
}

// protocol converts to Maestro's convention (cached_input_tokens and
// cache_write_input_tokens are subsets of input_tokens).
func (u codexUsage) protocol() protocol.Usage {
	return protocol.Usage{
		InputTokens:      max(u.InputTokens-u.CachedInputTokens-u.CacheWriteInputTokens, 0),
		CacheReadTokens:  u.CachedInputTokens,
		CacheWriteTokens: u.CacheWriteInputTokens,
		OutputTokens:     u.OutputTokens,
	}
}

type codexLine struct {
	envelope
	ThreadID string      `json:"thread_id"`
	Item     *codexItem  `json:"item"`
	Message  string      `json:"message"`
	Error    *codexError `json:"error"`
	Usage    *codexUsage `json:"usage"`
}

var reconnecting = regexp.MustCompile(`^Reconnecting\.\.\.\s*(\d+)/(\d+)`)

func (p *codexParser) tool(st *state, it *codexItem, completed bool) {
	name, args := it.Type, json.RawMessage(nil)
	switch it.Type {
	case "command_execution":
		args = oneKeyObject("command", it.Command)
	case "file_change":
		args, _ = json.Marshal(map[string]json.RawMessage{"changes": it.Changes})
	case "mcp_tool_call":
		name = "mcp__" + it.Server + "__" + it.Tool
		args = it.Arguments
	case "web_search":
		args = oneKeyObject("query", it.Query)
	}
	if !p.started[it.ID] {
		p.started[it.ID] = true
		st.closeResponse(protocol.Usage{}, 0)
		st.toolCall(it.ID, name, args, false)
	}
	out := it.AggregatedOutput
	if it.Type == "mcp_tool_call" && completed {
		out = textOfMCP(it.Result)
	}
	if len(out) > p.outputLen[it.ID] {
		st.toolOutput(it.ID, out[p.outputLen[it.ID]:], false)
		p.outputLen[it.ID] = len(out)
	}
	if completed {
		ok := it.Status == "completed" && (it.ExitCode == nil || *it.ExitCode == 0) && it.Error == nil
		code := ""
		if !ok {
			code = it.Status
			if it.Error != nil {
				st.toolOutput(it.ID, it.Error.Message, false)
			}
		}
		st.toolEnd(it.ID, ok, code, false)
	}
}

func textOfMCP(raw json.RawMessage) string {
	var r struct {
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(raw, &r) == nil && len(r.Content) > 0 {
		return textOf(r.Content)
	}
	return ""
}

// oneKeyObject is json.Marshal(map[string]string{key: value}) for a key
// that needs no escaping.
func oneKeyObject(key, value string) json.RawMessage {
	v, _ := json.Marshal(value)
	b := make([]byte, 0, len(key)+len(v)+5)
	b = append(b, '{', '"')
	b = append(b, key...)
	b = append(b, '"', ':')
	b = append(b, v...)
	return append(b, '}')
}

// newCodexFormat reads `codex exec --json`.
func newCodexFormat() format[codexLine, *codexLine] {
	p := &codexParser{started: map[string]bool{}, outputLen: map[string]int{}}
	m := map[string]handler[*codexLine]{
		"thread.started": func(st *state, l *codexLine, _ []byte) bool { st.setSession(l.ThreadID); return true },
		"error":          p.error,
		"turn.failed":    p.turnFailed,
		"turn.completed": p.turnCompleted,
	}
	on(m, p.item, "item.started", "item.updated", "item.completed")
	on(m, ignore, "turn.started", "item.plan.delta", "request_user_input")
	return format[codexLine, *codexLine]{on: m, finish: p.finish}
}

// item: an item started, grew or completed.
func (p *codexParser) item(st *state, l *codexLine, _ []byte) bool {
	it := l.Item
	if it == nil {
		return false
	}
	completed := l.Type == "item.completed"
	switch it.Type {
	case "agent_message":
		if completed {
			st.chunk(it.Text, false)
			p.lastText = it.Text
		}
	case "reasoning":
		if completed {
			st.chunk(it.Text, true)
		}
	case "command_execution", "file_change", "mcp_tool_call", "web_search", "collab_tool_call":
		if it.Type == "command_execution" && !p.started[it.ID] {
			p.shellItems++
		}
		p.tool(st, it, completed)
	case "todo_list", "plan":
		if completed {
			st.status("Plan updated: " + strings.TrimSpace(it.Text+string(it.Items)))
		}
	case "error":
		if completed {
			st.status("Agent warning: " + it.Message)
		}
	default:
		return false
	}
	return true
}

// error: "Reconnecting… n/m" is a retry; another error is kept for the
// turn's failure.
func (p *codexParser) error(st *state, l *codexLine, _ []byte) bool {
	if m := reconnecting.FindStringSubmatch(l.Message); m != nil {
		attempt, _ := strconv.Atoi(m[1])
		maxN, _ := strconv.Atoi(m[2])
		st.ev.Retry = &Retry{Attempt: attempt, Max: maxN, Status: StatusInText(l.Message), Message: l.Message}
		st.status("Model call failed; the agent retries: " + l.Message)
		return true
	}
	p.lastError = l.Message
	return true
}

func (p *codexParser) turnFailed(st *state, l *codexLine, _ []byte) bool {
	msg := p.lastError
	if l.Error != nil && l.Error.Message != "" {
		msg = l.Error.Message
	}
	st.closeResponse(protocol.Usage{}, 0)
	st.fail(extractMessage(msg), StatusInText(msg))
	st.finishResult(&Result{IsError: true, Subtype: "turn.failed", Text: p.lastText})
	return true
}

func (p *codexParser) turnCompleted(st *state, l *codexLine, _ []byte) bool {
	if st.opt.LookupShellCalls != nil {
		p.completed = l // completed at the end of the stream (finish)
		return true
	}
	p.complete(st, l)
	return true
}

// complete ends the turn of turn.completed line l.
func (p *codexParser) complete(st *state, l *codexLine) {
	r := &Result{Text: p.lastText, Subtype: "success"}
	var u protocol.Usage
	if l.Usage != nil {
		u = subUsage(l.Usage.protocol(), st.opt.BaselineUsage)
	}
	u.ModelID = st.modelID()
	st.closeResponse(u, 0)
	r.Usage = u
	r.Usage.TotalTokens = u.InputTokens + u.OutputTokens + u.CacheReadTokens + u.CacheWriteTokens
	r.Usage.Provider = st.opt.Provider
	st.finishResult(r)
}

// recoverShellCalls reports the shell calls of the turn that the rollout
// holds with an output but without a command_execution item, when they
// are exactly the calls the stream missed (the rollout's count of the
// turn's shell calls less the stream's items).
func (p *codexParser) recoverShellCalls(st *state) {
	if st.sessionID == "" {
		return
	}
	calls := st.opt.LookupShellCalls(st.sessionID)
	if len(calls.Unreported) == 0 || len(calls.Unreported) != calls.Total-p.shellItems {
		return
	}
	for _, c := range calls.Unreported {
		st.toolCall(c.CallID, "command_execution", oneKeyObject("command", c.Command), true)
		st.toolOutput(c.CallID, c.Output, true)
		code := ""
		if !c.Success {
			code = "failed"
		}
		st.toolEnd(c.CallID, c.Success, code, true)
	}
}

func (p *codexParser) finish(st *state) {
	if l := p.completed; l != nil {
		p.completed = nil
		p.recoverShellCalls(st)
		p.complete(st, l)
	}
	if st.result == nil && p.lastError != "" {
		st.fail(extractMessage(p.lastError), StatusInText(p.lastError))
	}
}

// extractMessage unwraps an API error body quoted in a message
// ({"error":{"message":…}}), keeping the outer text otherwise.
func extractMessage(s string) string {
	t := strings.TrimSpace(s)
	if strings.HasPrefix(t, "{") {
		var e struct {
			Error struct {
				Message string `json:"message"`
				Type    string `json:"type"`
			} `json:"error"`
		}
		if json.Unmarshal([]byte(t), &e) == nil && e.Error.Message != "" {
			if e.Error.Type != "" {
				return e.Error.Type + ": " + e.Error.Message
			}
			return e.Error.Message
		}
	}
	return t
}

// ShellCalls is what a session's storage recorded of the shell calls of
// its last turn (LookupShellCalls).
type ShellCalls struct {
	// Total counts the turn's shell calls.
	Total int
	// Unreported are those with an output but no command execution item.
	Unreported []ShellCall
}

// ShellCall is one shell call as the session's storage recorded it.
type ShellCall struct {
	CallID, Command string
	// Output is the command's output and Success whether it exited 0.
	Output  string
	Success bool
}

// codexShellTools are the function tools through which Codex runs a
// command (unified exec, and the shell tools of models without it).
var codexShellTools = map[string]bool{"exec_command": true, "shell_command": true, "shell": true, "container.exec": true}

// lastTurnShellCalls reads the shell calls of the last turn of the rollout
// of id (from its last task_started event): the function calls of the
// shell tools, their outputs, and the item_completed events of their
// CommandExecution items (whose id is the call's). A rollout that cannot
// be read yields none.
func (s *codexStore) lastTurnShellCalls(ctx context.Context, id string) ShellCalls {
	path, err := s.find(ctx, id)
	if err != nil {
		return ShellCalls{}
	}
	type call struct {
		ShellCall
		hasOutput bool
	}
	var calls []call
	index := map[string]int{}
	reported := map[string]bool{}
	var stats SessionStats
	err = jsonLines(path, &stats, func(line []byte) error {
		if !bytes.Contains(line, []byte(`"function_call`)) && !bytes.Contains(line, []byte(`"item_completed"`)) &&
			!bytes.Contains(line, []byte(`"task_started"`)) {
			return nil
		}
		var r rolloutRecord
		var it rolloutItem
		if json.Unmarshal(line, &r) != nil || json.Unmarshal(r.Payload, &it) != nil {
			return nil
		}
		switch {
		case r.Type == "event_msg" && it.Type == "task_started":
			calls, index, reported = nil, map[string]int{}, map[string]bool{}
		case r.Type == "event_msg" && it.Type == "item_completed" && it.Item != nil && it.Item.Type == "CommandExecution":
			reported[it.Item.ID] = true
		case r.Type == "response_item" && it.Type == "function_call" && codexShellTools[it.Name] && it.CallID != "":
			index[it.CallID] = len(calls)
			calls = append(calls, call{ShellCall: ShellCall{CallID: it.CallID, Command: shellCommand(it.Arguments)}})
		case r.Type == "response_item" && it.Type == "function_call_output":
			if i, ok := index[it.CallID]; ok {
				text, failed := codexOutput(it.Output)
				calls[i].Output, calls[i].Success = shellResult(text)
				calls[i].Success = calls[i].Success && !failed
				calls[i].hasOutput = true
			}
		}
		return nil
	})
	if err != nil {
		return ShellCalls{}
	}
	out := ShellCalls{Total: len(calls)}
	for _, c := range calls {
		if c.hasOutput && !reported[c.CallID] {
			out.Unreported = append(out.Unreported, c.ShellCall)
		}
	}
	return out
}

// shellCommand is the command of a shell tool's arguments: cmd
// (exec_command) or command, a string or an argv (joined by spaces).
func shellCommand(args string) string {
	var a struct {
		Cmd     json.RawMessage `json:"cmd"`
		Command json.RawMessage `json:"command"`
	}
	if json.Unmarshal([]byte(args), &a) != nil {
		return args
	}
	raw := a.Cmd
	if len(raw) == 0 {
		raw = a.Command
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var argv []string
	if json.Unmarshal(raw, &argv) == nil {
		return strings.Join(argv, " ")
	}
	return args
}

// shellExit finds the exit status in a shell tool's output: "Process
// exited with code N" (exec_command), "Exit code: N" (shell_command).
var shellExit = regexp.MustCompile(`(?m)^(?:Process exited with code|Exit code:) (-?\d+)\s*$`)

// shellResult splits a shell tool's output into the command's output (what
// follows "Output:") and whether it exited 0 (true when it says not).
func shellResult(text string) (string, bool) {
	ok := true
	if m := shellExit.FindStringSubmatch(text); m != nil {
		ok = m[1] == "0"
	}
	if _, after, found := strings.Cut(text, "\nOutput:\n"); found {
		return after, ok
	}
	return text, ok
}
