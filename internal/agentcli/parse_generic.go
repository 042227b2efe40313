package agentcli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/maestro-run/maestro/internal/protocol"
)

// The two generic parsers let a user adapter drive a CLI Maestro has no
// code for (docs/agent-clis.md, "Adapters for any CLI"):
//
//   - text: every stdout line is answer text, except lines matched by the
//     optional regexps for the session id, usage, cost, errors and noise;
//   - jsonl: JSON Lines whose event types and fields are mapped by
//     declarative rules with simple path expressions.

// TextParserConfig configures the text parser (parser: text). Each regexp
// is optional; a line any of them matches is not answer text. The first
// group (else the whole match) is the value.
type TextParserConfig struct {
	// SessionID finds the CLI's session id.
	SessionID string `yaml:"session_id"`
	// InputTokens and OutputTokens find token counts ("2.1k" is 2100).
	InputTokens  string `yaml:"input_tokens"`
	OutputTokens string `yaml:"output_tokens"`
	// Cost finds the turn's cost in US dollars.
	Cost string `yaml:"cost"`
	// Error finds a failure; its message is classified by the adapter's
	// error patterns.
	Error string `yaml:"error"`
	// Skip drops matching lines (banners, prompts, spinners).
	Skip []string `yaml:"skip"`
}

// JSONLMapping configures the jsonl parser (parser: jsonl). Every line is a
// JSON object; Type is the path of its event type, and each rule names the
// type it applies to (when) and the paths of the fields it reads. Paths are
// dot-separated keys with optional list indices: "item.content[0].text".
type JSONLMapping struct {
	// Type is the path of the event type (default "type").
	Type string `yaml:"type"`
	// SessionID and Model are paths read on every line.
	SessionID string `yaml:"session_id"`
	Model     string `yaml:"model"`
	// Text and Thinking lines are response chunks.
	Text     []JSONLText `yaml:"text"`
	Thinking []JSONLText `yaml:"thinking"`
	// ToolCall lines start a tool call (also its tool_start unless
	// ToolStart rules exist); ToolOutput lines carry its output; ToolEnd
	// lines end it (a failure when the error path holds a non-empty value).
	ToolCall   []JSONLTool `yaml:"tool_call"`
	ToolStart  []JSONLTool `yaml:"tool_start"`
	ToolOutput []JSONLTool `yaml:"tool_output"`
	ToolEnd    []JSONLTool `yaml:"tool_end"`
	// Usage lines end the open response with one model call's usage.
	Usage []JSONLUsage `yaml:"usage"`
	// Result lines end the turn. Without result rules the end of the
	// stream does.
	Result []JSONLResult `yaml:"result"`
	// Error lines are failures, classified by the adapter's error patterns.
	Error []JSONLError `yaml:"error"`
}

// JSONLText maps a text or thinking line.
type JSONLText struct {
	When  string `yaml:"when"`
	Field string `yaml:"field"`
}

// JSONLTool maps a tool line: ID always; Name and Args on tool_call;
// Content on tool_output (and optionally tool_end); Error on tool_end.
type JSONLTool struct {
	When    string `yaml:"when"`
	ID      string `yaml:"id"`
	Name    string `yaml:"name"`
	Args    string `yaml:"args"`
	Content string `yaml:"content"`
	Error   string `yaml:"error"`
}

// JSONLUsage maps a usage line (every path optional).
type JSONLUsage struct {
	When       string `yaml:"when"`
	Input      string `yaml:"input"`
	Output     string `yaml:"output"`
	CacheRead  string `yaml:"cache_read"`
	CacheWrite string `yaml:"cache_write"`
	Cost       string `yaml:"cost"`
}

// JSONLResult maps the turn's result line: its text (default: the text
// streamed) and an error flag.
type JSONLResult struct {
	When    string `yaml:"when"`
	Text    string `yaml:"text"`
	IsError string `yaml:"is_error"`
}

// JSONLError maps an error line: its message and an HTTP status.
type JSONLError struct {
	When    string `yaml:"when"`
	Message string `yaml:"message"`
	Status  string `yaml:"status"`
}

// rawLiner is a format that reads every line itself (JSON or not).
type rawLiner interface {
	rawLine(st *state, line []byte)
}

// textFormat is the text parser.
type textFormat struct {
	session, input, output, cost, errRE *regexp.Regexp
	skip                                []*regexp.Regexp
	text                                strings.Builder
	usage                               protocol.Usage
	costUSD                             float64
	errMsg                              string
}

func newTextFormat(c TextParserConfig) (*textFormat, error) {
	f := &textFormat{}
	for _, r := range []struct {
		dst **regexp.Regexp
		src string
	}{{&f.session, c.SessionID}, {&f.input, c.InputTokens}, {&f.output, c.OutputTokens}, {&f.cost, c.Cost}, {&f.errRE, c.Error}} {
		if r.src == "" {
			continue
		}
		re, err := regexp.Compile(r.src)
		if err != nil {
			return nil, fmt.Errorf("text parser: %w", err)
		}
		*r.dst = re
	}
	for _, s := range c.Skip {
		re, err := regexp.Compile(s)
		if err != nil {
			return nil, fmt.Errorf("text parser: %w", err)
		}
		f.skip = append(f.skip, re)
	}
	return f, nil
}

// group returns re's first group in line (else the whole match).
func group(re *regexp.Regexp, line string) (string, bool) {
	if re == nil {
		return "", false
	}
	m := re.FindStringSubmatch(line)
	if m == nil {
		return "", false
	}
	if len(m) > 1 {
		return m[1], true
	}
	return m[0], true
}

// tokenCount reads "1234", "1,234", "2.1k" or "1.5M".
func tokenCount(s string) int64 {
	s = strings.ReplaceAll(strings.TrimSpace(s), ",", "")
	mult := 1.0
	switch {
	case strings.HasSuffix(s, "k"), strings.HasSuffix(s, "K"):
		mult, s = 1e3, s[:len(s)-1]
	case strings.HasSuffix(s, "M"), strings.HasSuffix(s, "m"):
		mult, s = 1e6, s[:len(s)-1]
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0
	}
	return int64(f*mult + 0.5)
}

func (f *textFormat) line(*state, []byte) lineResult { return lineOK }

func (f *textFormat) rawLine(st *state, raw []byte) {
	line := string(raw)
	meta := false
	if id, ok := group(f.session, line); ok {
		st.setSession(id)
		meta = true
	}
	if v, ok := group(f.input, line); ok {
		f.usage.InputTokens += tokenCount(v)
		meta = true
	}
	if v, ok := group(f.output, line); ok {
		f.usage.OutputTokens += tokenCount(v)
		meta = true
	}
	if v, ok := group(f.cost, line); ok {
		c, _ := strconv.ParseFloat(strings.TrimPrefix(strings.TrimSpace(v), "$"), 64)
		f.costUSD += c
		meta = true
	}
	if msg, ok := group(f.errRE, line); ok {
		if f.errMsg == "" {
			f.errMsg = msg
			st.fail(msg, StatusInText(msg))
		}
		return
	}
	if meta {
		return
	}
	for _, re := range f.skip {
		if re.MatchString(line) {
			return
		}
	}
	if strings.TrimSpace(line) == "" && f.text.Len() == 0 {
		return
	}
	st.chunk(line+"\n", false)
	f.text.WriteString(line + "\n")
}

func (f *textFormat) end(st *state) {
	st.closeResponse(f.usage, f.costUSD)
	r := &Result{Text: strings.TrimSpace(f.text.String()), Usage: st.reported, CostUSD: st.reported.TotalCostUSD,
		IsError: f.errMsg != "", Subtype: "success"}
	if r.IsError {
		r.Subtype = "error"
	}
	r.Usage.Provider = st.opt.Provider
	r.Usage.ModelID = st.model
	st.finishResult(r)
	st.inferred = true
}

// jsonlFormat is the jsonl mapping parser.
type jsonlFormat struct {
	m        JSONLMapping
	text     strings.Builder
	resulted bool
	failed   bool
}

func newJSONLFormat(m JSONLMapping) *jsonlFormat {
	if m.Type == "" {
		m.Type = "type"
	}
	return &jsonlFormat{m: m}
}

// lookup reads path in v (decoded JSON): keys separated by '.', each
// optionally followed by [n] list indices.
func lookup(v any, path string) (any, bool) {
	if path == "" {
		return nil, false
	}
	for seg := range strings.SplitSeq(path, ".") {
		key, rest, _ := strings.Cut(seg, "[")
		if key != "" {
			obj, ok := v.(map[string]any)
			if !ok {
				return nil, false
			}
			if v, ok = obj[key]; !ok {
				return nil, false
			}
		}
		for rest != "" {
			idx, after, ok := strings.Cut(rest, "]")
			n, err := strconv.Atoi(idx)
			list, isList := v.([]any)
			if !ok || err != nil || !isList || n < 0 || n >= len(list) {
				return nil, false
			}
			v = list[n]
			rest = strings.TrimPrefix(after, "[")
		}
	}
	return v, true
}

var pathRE = regexp.MustCompile(`^[^.\[\]]*(\[\d+\])*(\.[^.\[\]]+(\[\d+\])*)*$`)

// validPath reports whether p is a path expression lookup understands.
func validPath(p string) bool { return p != "" && pathRE.MatchString(p) }

// str renders a JSON value as text: strings as they are, other values as
// JSON; absent or null values are "".
func str(v any, ok bool) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case json.Number:
		return x.String()
	}
	if !ok {
		return ""
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func num(v any, ok bool) float64 {
	if !ok {
		return 0
	}
	switch x := v.(type) {
	case json.Number:
		f, _ := x.Float64()
		return f
	case string:
		f, _ := strconv.ParseFloat(x, 64)
		return f
	}
	return 0
}

// truthy is false for absent, null, false, 0, "" and "false".
func truthy(v any, ok bool) bool {
	if !ok {
		return false
	}
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case string:
		return x != "" && x != "false"
	case json.Number:
		return num(x, true) != 0
	}
	return true
}

func (f *jsonlFormat) line(st *state, raw []byte) lineResult {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var obj map[string]any
	if dec.Decode(&obj) != nil {
		return lineNonJSON
	}
	get := func(path string) (any, bool) { return lookup(obj, path) }
	known := false
	if id := str(get(f.m.SessionID)); id != "" {
		st.setSession(id)
		known = true
	}
	if model := str(get(f.m.Model)); model != "" {
		st.model = model
		known = true
	}
	typ := str(get(f.m.Type))
	for _, r := range f.m.Thinking {
		if r.When == typ {
			known = true
			st.chunk(str(get(r.Field)), true)
		}
	}
	for _, r := range f.m.Text {
		if r.When == typ {
			known = true
			t := str(get(r.Field))
			st.chunk(t, false)
			f.text.WriteString(t)
		}
	}
	for _, r := range f.m.ToolCall {
		if r.When == typ {
			known = true
			st.closeResponse(protocol.Usage{}, 0)
			args := json.RawMessage(str(get(r.Args)))
			if v, ok := get(r.Args); ok {
				if _, isStr := v.(string); !isStr {
					args, _ = json.Marshal(v)
				}
			}
			id := str(get(r.ID))
			st.toolCallOnly(id, str(get(r.Name)), args, false)
			if len(f.m.ToolStart) == 0 {
				st.toolEmit(protocol.ToolStart{CallID: id}, false)
			}
		}
	}
	for _, r := range f.m.ToolStart {
		if r.When == typ {
			known = true
			st.toolEmit(protocol.ToolStart{CallID: str(get(r.ID))}, false)
		}
	}
	for _, r := range f.m.ToolOutput {
		if r.When == typ {
			known = true
			st.toolOutput(str(get(r.ID)), str(get(r.Content)), false)
		}
	}
	for _, r := range f.m.ToolEnd {
		if r.When == typ {
			known = true
			id := str(get(r.ID))
			st.toolOutput(id, str(get(r.Content)), false)
			failed := truthy(get(r.Error))
			code := ""
			if failed {
				code = "tool_error"
				if v, _ := get(r.Error); r.Content == "" {
					if msg, ok := v.(string); ok {
						st.toolOutput(id, msg, false)
					}
				}
			}
			st.toolEnd(id, !failed, code, false)
		}
	}
	for _, r := range f.m.Usage {
		if r.When == typ {
			known = true
			u := protocol.Usage{
				InputTokens: int64(num(get(r.Input))), OutputTokens: int64(num(get(r.Output))),
				CacheReadTokens: int64(num(get(r.CacheRead))), CacheWriteTokens: int64(num(get(r.CacheWrite))),
			}
			st.closeResponse(u, num(get(r.Cost)))
		}
	}
	for _, r := range f.m.Error {
		if r.When == typ {
			known = true
			msg := str(get(r.Message))
			if msg == "" {
				msg = "the agent reported an error (" + typ + ")"
			}
			f.failed = true
			st.fail(msg, int(num(get(r.Status))))
		}
	}
	for _, r := range f.m.Result {
		if r.When == typ {
			known = true
			text := f.text.String()
			if v, ok := get(r.Text); ok {
				text = str(v, ok)
			}
			f.finish(st, text, truthy(get(r.IsError)))
		}
	}
	if !known {
		return lineUnknown
	}
	return lineOK
}

// finish ends the turn with a Result summing the usage reported.
func (f *jsonlFormat) finish(st *state, text string, isError bool) {
	st.closeResponse(protocol.Usage{}, 0)
	r := &Result{Text: text, Usage: st.reported, CostUSD: st.reported.TotalCostUSD, IsError: isError || f.failed, Subtype: "success"}
	if r.IsError {
		r.Subtype = "error"
	}
	r.Usage.Provider = st.opt.Provider
	r.Usage.ModelID = st.model
	f.resulted = true
	st.finishResult(r)
}

func (f *jsonlFormat) end(st *state) {
	if !f.resulted && len(f.m.Result) == 0 {
		f.finish(st, f.text.String(), false)
		st.inferred = true
	}
}
