package agentcli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/maestro-run/maestro/internal/protocol"
)

// Event is what one stdout line of an agent CLI yields.
type Event struct {
	// Raw is the line as read, without its newline (nil for the events
	// Finish synthesises at the end of the stream).
	Raw []byte
	// Messages are the protocol events the line maps to (often none).
	Messages []protocol.Message
	// SessionID is set on the line that first reveals the CLI's session id.
	SessionID string
	// Result is set on the line that carries the turn's final result.
	Result *Result
	// Error is a failure reported by a structured payload on this line.
	Error *AgentError
	// Retry is set when the CLI reports it is retrying a failed model call
	// itself (Claude's system/api_retry, Codex's "Reconnecting… n/5").
	Retry *Retry
}

// Retry is a model-call retry the CLI performs itself.
type Retry struct {
	Attempt, Max int
	Status       int
	Message      string
}

// Result is the final result of one CLI turn.
type Result struct {
	SessionID string `json:"session_id"`
	// Text is the final answer.
	Text string `json:"text"`
	// IsError and Subtype are the CLI's own verdict (Claude/Qwen
	// is_error/subtype; Gemini status "error"; Codex turn.failed).
	IsError bool   `json:"is_error"`
	Subtype string `json:"subtype"`
	// Usage totals for the turn, in Maestro's convention (input excludes
	// cache reads and writes); CostUSD when the CLI reports it.
	Usage    protocol.Usage `json:"usage"`
	CostUSD  float64        `json:"cost_usd"`
	NumTurns int            `json:"num_turns"`
	// DurationMS as the CLI reports it.
	DurationMS int64 `json:"duration_ms"`
	// PermissionDenials counts tool calls the CLI refused.
	PermissionDenials int `json:"permission_denials"`
}

// Stats counts what a parser saw.
type Stats struct {
	Lines   int `json:"lines"`    // lines read
	Events  int `json:"events"`   // protocol events produced
	Unknown int `json:"unknown"`  // JSON lines of an unknown event type
	NonJSON int `json:"non_json"` // lines that are not JSON objects (banners, noise)
	Partial int `json:"partial"`  // a final line without a newline
}

// ParserNames lists the parsers a definition may name.
func ParserNames() []string {
	return []string{"claude-stream-json", "codex-json", "gemini-stream-json", "opencode-json", "qwen-stream-json", "text", "jsonl"}
}

// ParserOptions configure a Parser.
type ParserOptions struct {
	// Provider fills protocol Usage.Provider (the adapter id).
	Provider string
	// Classifier classifies structured error payloads (default: generic).
	Classifier *Classifier
	// NewResponseID returns response ids (default resp_<ms>_<n base36>).
	NewResponseID func() string
	// BaselineUsage is the thread's running total before this process, for
	// CLIs that report cumulative usage (Codex on resume).
	BaselineUsage protocol.Usage
	// Model is the model response_end usage names when the stream does not
	// (the invocation's --model).
	Model string
	// LookupModel, when set, finds the model of a session whose stream
	// names none (Codex, OpenCode: read from the CLI's session storage);
	// called at most once, when the first response ends.
	LookupModel func(sessionID string) string
	// LookupShellCalls, when set, reads from the CLI's session storage the
	// shell calls of the session's last turn (Codex: its rollout), for
	// calls the stream did not report; called at most once, at the end of
	// a stream that completed a turn (parse_codex.go).
	LookupShellCalls func(sessionID string) ShellCalls
	// Text and JSONL configure the generic parsers (parser text / jsonl).
	Text  TextParserConfig
	JSONL JSONLMapping
	// Capabilities, when set, gate what the parser reports (gate.go); nil
	// reports everything.
	Capabilities *Capabilities
	// MaxLine bounds one line of the stream (default 64 MiB, maxLine):
	// Parse stops at a longer line with a *LineTooLongError.
	MaxLine int
}

// DefinitionParserOptions are the parser options of def: its id, its
// error classifier and its generic parser configuration.
func DefinitionParserOptions(def *Definition) ParserOptions {
	caps := def.Capabilities
	return ParserOptions{Provider: def.ID, Classifier: NewClassifier(def), Text: def.TextParser, JSONL: def.JSONL, Capabilities: &caps}
}

// Parser turns one CLI process's stdout lines into events. It keeps state
// (open response, tool names, session id), so use one per process.
type Parser struct {
	name  string
	impl  lineParser
	st    *state
	stats Stats
}

// lineParser is one CLI's format (a format[L, P], see parse_format.go).
type lineParser interface {
	// line decodes and handles one line that starts with '{': lineNonJSON
	// when it is not a JSON object whose "type" is a string, lineUnknown
	// for an unknown event type (or a field of the wrong type).
	line(st *state, raw []byte) lineResult
	// end closes what the format keeps open at the end of the stream.
	end(st *state)
}

var responseSeq atomic.Uint64

// NewParser returns the parser called name.
func NewParser(name string, opt ParserOptions) (*Parser, error) {
	var impl lineParser
	switch name {
	case "claude-stream-json":
		impl = newClaudeFormat(false)
	case "qwen-stream-json":
		impl = newClaudeFormat(true)
	case "codex-json":
		impl = newCodexFormat()
	case "gemini-stream-json":
		impl = newGeminiFormat()
	case "opencode-json":
		impl = newOpencodeFormat()
	case "text":
		f, err := newTextFormat(opt.Text)
		if err != nil {
			return nil, err
		}
		impl = f
	case "jsonl":
		impl = newJSONLFormat(opt.JSONL)
	default:
		return nil, fmt.Errorf("agentcli: unknown parser %q (known: %v)", name, ParserNames())
	}
	if opt.Classifier == nil {
		opt.Classifier = NewClassifier(nil)
	}
	if opt.NewResponseID == nil {
		opt.NewResponseID = func() string {
			return "resp_" + strconv.FormatInt(time.Now().UnixMilli(), 10) + "_" + strconv.FormatUint(responseSeq.Add(1), 36)
		}
	}
	return &Parser{name: name, impl: impl, st: &state{opt: opt, model: opt.Model, toolNames: map[string]string{}}}, nil
}

// Name is the parser's name.
func (p *Parser) Name() string { return p.name }

// Stats returns the counters so far.
func (p *Parser) Stats() Stats { return p.stats }

// SessionID is the session id seen so far ("" if none yet, or when the
// definition has no session_id capability).
func (p *Parser) SessionID() string {
	if c := p.st.opt.Capabilities; c != nil && !c.SessionID {
		return ""
	}
	return p.st.sessionID
}

// SlashCommands are the slash commands the CLI published (Claude Code's
// init event), nil when none or when the definition has no slash_commands
// capability.
func (p *Parser) SlashCommands() []string {
	if c := p.st.opt.Capabilities; c != nil && !c.SlashCommands {
		return nil
	}
	return p.st.slashCommands
}

// Result is the final result seen so far (nil if none yet).
func (p *Parser) Result() *Result { return p.st.result }

// ResultInferred reports that Result was made up at the end of the stream
// rather than reported by the CLI: the stream's end ended the turn (the
// text parser, jsonl without result rules, OpenCode before a step that
// finished the turn). When the CLI was stopped, such a result is no
// answer.
func (p *Parser) ResultInferred() bool { return p.st.result != nil && p.st.inferred }

// Feed parses one line (without its newline). Non-JSON lines and unknown
// event types yield an Event with no messages and are counted.
func (p *Parser) Feed(line []byte) Event {
	p.stats.Lines++
	ev := Event{Raw: line}
	if rl, ok := p.impl.(rawLiner); ok {
		p.st.begin(&ev)
		rl.rawLine(p.st, line)
		p.st.end()
		p.st.gateEvent(&ev)
		p.stats.Events += len(ev.Messages)
		return ev
	}
	trimmed := bytes.TrimSpace(line)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		if len(trimmed) > 0 {
			p.stats.NonJSON++
		}
		return ev
	}
	p.st.begin(&ev)
	switch p.impl.line(p.st, trimmed) {
	case lineNonJSON:
		p.stats.NonJSON++
	case lineUnknown:
		p.stats.Unknown++
	}
	p.st.end()
	p.st.gateEvent(&ev)
	p.stats.Events += len(ev.Messages)
	return ev
}

// Finish closes an open response and pending tool calls at the end of the
// stream; the returned Event has no Raw line.
func (p *Parser) Finish() Event {
	var ev Event
	p.st.begin(&ev)
	p.impl.end(p.st)
	p.st.closeResponse(protocol.Usage{}, 0)
	p.st.end()
	p.st.gateEvent(&ev)
	p.stats.Events += len(ev.Messages)
	return ev
}

// maxLine bounds one line; longer lines are an error (a stuck CLI).
const maxLine = 64 << 20

// LineTooLongError is Parse's error for a line over its parser's limit:
// the stream is not read past it.
type LineTooLongError struct {
	Parser string
	Limit  int
}

func (e *LineTooLongError) Error() string {
	return fmt.Sprintf("read %s stream: a line of its output is longer than the %s limit", e.Parser, byteSize(e.Limit))
}

// byteSize is n bytes as "64 MiB" when a whole number of MiB or KiB.
func byteSize(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d-byte", n)
}

// Parse reads r line by line (bufio.Reader, no whole-stream buffering),
// yielding one Event per line as soon as it is complete and a final Event
// from Finish. A last line without a newline is parsed and counted as
// partial. A line over the parser's limit (ParserOptions.MaxLine) ends
// the stream with a *LineTooLongError, holding no more than the limit.
func Parse(r io.Reader, p *Parser) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		limit := p.st.opt.MaxLine
		if limit <= 0 {
			limit = maxLine
		}
		br := bufio.NewReaderSize(r, 64<<10)
		var line []byte
		for {
			frag, err := br.ReadSlice('\n')
			line = append(line, frag...)
			if n := len(bytes.TrimSuffix(line, []byte("\n"))); n > limit {
				yield(Event{}, &LineTooLongError{Parser: p.name, Limit: limit})
				return
			}
			if errors.Is(err, bufio.ErrBufferFull) {
				continue
			}
			if len(line) > 0 {
				if line[len(line)-1] == '\n' {
					line = line[:len(line)-1]
				} else {
					p.stats.Partial++
				}
				if !yield(p.Feed(bytes.TrimSuffix(line, []byte("\r"))), nil) {
					return
				}
				line = nil // the event keeps it (Event.Raw)
			}
			if err != nil {
				if !errors.Is(err, io.EOF) {
					yield(Event{}, fmt.Errorf("read %s stream: %w", p.name, err))
					return
				}
				yield(p.Finish(), nil)
				return
			}
		}
	}
}

// state is the shared bookkeeping of the line parsers.
type state struct {
	opt ParserOptions
	ev  *Event

	sessionID string
	model     string
	lookedUp  bool
	result    *Result
	// inferred: the result was made up at the end of the stream (the
	// text parser, jsonl without result rules, OpenCode before its last
	// step ended), not reported by the CLI: a stream cut short by an
	// interrupt says nothing about the turn being done.
	inferred bool
	// slashCommands are the CLI's slash commands (Claude's init event).
	slashCommands []string
	// held are the chunks of the open response while streaming is off;
	// respText its answer text, lastRespText that of the last response
	// with text (the answer when result messages are off).
	held         []*heldChunk
	respText     strings.Builder
	lastRespText string

	respID    string // open response, "" when none
	respStart time.Time
	ttft      int64
	gotChunk  bool
	// reported sums the usage already put on response_end events.
	reported protocol.Usage

	toolNames  map[string]string
	tools      []string // tools used this prompt (unique, sorted)
	nOK, nFail int
	pending    []protocol.Message // held until the open response ends
}

func (s *state) begin(ev *Event) { s.ev = ev }
func (s *state) end()            { s.ev = nil }

// modelID is the model the stream named, else the invocation's, else the
// one LookupModel finds for the session (asked once).
func (s *state) modelID() string {
	if s.model == "" && !s.lookedUp && s.opt.LookupModel != nil && s.sessionID != "" {
		s.lookedUp = true
		s.model = s.opt.LookupModel(s.sessionID)
	}
	return s.model
}

func (s *state) emit(m protocol.Message) { s.ev.Messages = append(s.ev.Messages, m) }

func (s *state) setSession(id string) {
	if id != "" && s.sessionID == "" {
		s.sessionID = id
		s.ev.SessionID = id
	}
}

// openResponse starts a response if none is open.
func (s *state) openResponse() {
	if s.respID != "" {
		return
	}
	s.respID = s.opt.NewResponseID()
	s.respStart = time.Now()
	s.gotChunk = false
	s.respText.Reset()
	s.emit(protocol.ResponseStart{ResponseID: s.respID})
}

func (s *state) chunk(text string, thinking bool) {
	if text == "" {
		return
	}
	s.openResponse()
	if !s.gotChunk {
		s.gotChunk = true
		s.ttft = time.Since(s.respStart).Milliseconds()
	}
	if !thinking {
		s.respText.WriteString(text)
	}
	if c := s.opt.Capabilities; c != nil && !c.Streaming {
		s.hold(text, thinking)
		return
	}
	s.emit(protocol.ResponseChunk{ResponseID: s.respID, Content: text, IsThinking: thinking})
}

// closeResponse ends the open response with u (Maestro's convention) and
// then emits the tool events held back for it. With no open response and
// a non-zero u, an empty response carries the usage.
func (s *state) closeResponse(u protocol.Usage, cost float64) {
	if s.respID == "" && (u.InputTokens+u.OutputTokens+u.CacheReadTokens+u.CacheWriteTokens > 0 || cost > 0) {
		s.openResponse()
	}
	if s.respID != "" {
		u.TotalTokens = u.InputTokens + u.OutputTokens + u.CacheReadTokens + u.CacheWriteTokens
		u.TotalCostUSD = cost
		if u.ModelID == "" {
			u.ModelID = s.modelID()
		}
		u.Provider = s.opt.Provider
		end := protocol.ResponseEnd{
			ResponseID: s.respID, Usage: u,
			ToolsSummary: protocol.ToolsSummary{ToolsUsed: slices.Clone(s.tools), CallsSucceeded: s.nOK, CallsFailed: s.nFail},
			DurationMS:   time.Since(s.respStart).Milliseconds(),
		}
		if end.ToolsSummary.ToolsUsed == nil {
			end.ToolsSummary.ToolsUsed = []string{}
		}
		if s.gotChunk {
			t := s.ttft
			end.TTFTMS = &t
		}
		s.release()
		if s.respText.Len() > 0 {
			s.lastRespText = s.respText.String()
		}
		s.emit(end)
		s.reported = addUsage(s.reported, u)
		s.respID = ""
	}
	for _, m := range s.pending {
		s.emit(m)
	}
	s.pending = nil
}

// toolEmit emits m now, or holds it while a response is open when hold.
func (s *state) toolEmit(m protocol.Message, hold bool) {
	if hold && s.respID != "" {
		s.pending = append(s.pending, m)
		return
	}
	s.emit(m)
}

func (s *state) toolCall(id, name string, args json.RawMessage, hold bool) {
	s.toolCallOnly(id, name, args, hold)
	s.toolEmit(protocol.ToolStart{CallID: id}, hold)
}

// toolCallOnly emits a tool_call without its tool_start.
func (s *state) toolCallOnly(id, name string, args json.RawMessage, hold bool) {
	if len(args) == 0 || !json.Valid(args) {
		args = json.RawMessage("{}")
	}
	s.toolNames[id] = name
	if i, found := slices.BinarySearch(s.tools, name); !found {
		s.tools = slices.Insert(s.tools, i, name)
	}
	s.toolEmit(protocol.ToolCall{CallID: id, Tool: name, Args: args}, hold)
}

func (s *state) toolOutput(id, content string, hold bool) {
	if content != "" {
		s.toolEmit(protocol.ToolOutput{CallID: id, Content: content}, hold)
	}
}

func (s *state) toolEnd(id string, success bool, code string, hold bool) {
	if success {
		s.nOK++
	} else {
		s.nFail++
	}
	s.toolEmit(protocol.ToolEnd{CallID: id, Success: success, ErrorCode: code}, hold)
}

// fail records a structured error payload.
func (s *state) fail(message string, status int) *AgentError {
	e := s.opt.Classifier.Classify(message, status)
	s.ev.Error = e
	s.emit(protocol.Error{Message: e.Error(), Fatal: false, ErrorType: e.Category.ErrorType()})
	return e
}

func (s *state) status(msg string) { s.emit(protocol.Status{Message: msg}) }

func (s *state) finishResult(r *Result) {
	if r.SessionID == "" {
		r.SessionID = s.sessionID
	}
	s.result = r
	s.ev.Result = r
}

func addUsage(a, b protocol.Usage) protocol.Usage {
	a.InputTokens += b.InputTokens
	a.OutputTokens += b.OutputTokens
	a.CacheReadTokens += b.CacheReadTokens
	a.CacheWriteTokens += b.CacheWriteTokens
	a.TotalTokens += b.TotalTokens
	a.TotalCostUSD += b.TotalCostUSD
	return a
}

// subUsage returns a-b per counter, never below zero.
func subUsage(a, b protocol.Usage) protocol.Usage {
	sub := func(x, y int64) int64 { return max(x-y, 0) }
	return protocol.Usage{
		InputTokens: sub(a.InputTokens, b.InputTokens), OutputTokens: sub(a.OutputTokens, b.OutputTokens),
		CacheReadTokens: sub(a.CacheReadTokens, b.CacheReadTokens), CacheWriteTokens: sub(a.CacheWriteTokens, b.CacheWriteTokens),
		ModelID: a.ModelID,
	}
}

// textOf renders tool result content: a string, or a list of
// {type:"text", text} blocks.
func textOf(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &blocks) == nil {
		var b bytes.Buffer
		for _, bl := range blocks {
			b.WriteString(bl.Text)
		}
		return b.String()
	}
	return string(raw)
}
