package agentcli

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/maestro-run/maestro/internal/protocol"
)

// Category classifies an agent CLI failure.
type Category string

// Failure categories.
const (
	AuthExpired      Category = "auth_expired"
	TokenExhaustion  Category = "token_exhaustion" // the context window is full
	RateLimited      Category = "rate_limited"     // including plan quotas
	NetworkError     Category = "network_error"
	AgentCrashed     Category = "agent_crashed"
	PermissionDenied Category = "permission_denied"
	SessionNotFound  Category = "session_not_found"
	HITLGate         Category = "hitl_gate"
	// InvalidRequest is Maestro's addition for a request the model API
	// rejected as malformed (HTTP 400/422): not retried, not a crash.
	InvalidRequest Category = "invalid_request"
	Unknown        Category = "unknown"
)

// CategoryOrder is the order patterns are tried in (by hit frequency);
// the first match wins.
var CategoryOrder = []Category{RateLimited, NetworkError, TokenExhaustion, AuthExpired, AgentCrashed, SessionNotFound, PermissionDenied}

// AllCategories lists every category.
var AllCategories = []Category{AuthExpired, TokenExhaustion, RateLimited, NetworkError, AgentCrashed, PermissionDenied, SessionNotFound, HITLGate, InvalidRequest, Unknown}

// Recoverable reports whether retrying (or re-seeding) can help.
func (c Category) Recoverable() bool {
	switch c {
	case PermissionDenied, AgentCrashed, AuthExpired, HITLGate, InvalidRequest:
		return false
	}
	return true
}

// Retryable reports whether the same request may simply be sent again
// after a wait (rate limits and network failures).
func (c Category) Retryable() bool { return c == RateLimited || c == NetworkError }

// ErrorType is the protocol error_type of the category.
func (c Category) ErrorType() protocol.ErrorType {
	if c.Retryable() {
		return protocol.ErrorTransient
	}
	return protocol.ErrorFatal
}

// AgentError is a classified failure of an agent CLI.
type AgentError struct {
	Category Category
	Message  string
	// Source is where it was found: "stream" (a structured error payload),
	// "stderr" or "exit".
	Source string
	// Status is the HTTP status the CLI reported, when it did.
	Status int
	// ExitCode is the CLI's exit status when known (-1 when killed).
	ExitCode int
	// RetryAt is the reset time parsed from a plan-quota message.
	RetryAt time.Time
}

// Error formats the failure as "category: message".
func (e *AgentError) Error() string { return string(e.Category) + ": " + e.Message }

// generic patterns used for every definition after its own.
var generic = ErrorPatterns{
	RateLimited: []string{`rate.?limit`, `too many requests`, `overloaded`, `quota.*exceeded`,
		`usage.?limit|hit your.*limit`, `resource.?exhausted`},
	NetworkError: []string{`connection\s*(failed|refused|error|reset|closed|timed?\s*out)`,
		`(?-i)ECONNREFUSED|ECONNRESET|ETIMEDOUT|ENOTFOUND`, `request\s+timed?\s*out|timed?\s*out\s+waiting`,
		`network\s+(error|failure|unavailable)`, `socket hang up`, `fetch failed`,
		`unable to connect|cannot connect`},
	TokenExhaustion: []string{`prompt.*too\s+long`, `context.*(exceeded|too long|length)`, `maximum.*tokens`, `token limit`},
	AuthExpired: []string{`invalid.*api.?key`, `authentication.?(failed|error)`, `unauthori[sz]ed`,
		`not authenticated`, `api.?key.*(expired|not valid)`, `oauth token has expired`,
		`missing api.?key|no api.?key|must (specify|set) the \w*api_key`},
	AgentCrashed:     []string{`\b(fatal|unexpected|internal|unhandled)\s+error\b`, `\bpanic:`},
	SessionNotFound:  []string{`no conversation found with session id`, `session.*not found`, `invalid.*session`},
	PermissionDenied: []string{`permission denied`, `access denied`},
}

// Classifier matches text against a definition's patterns, then the
// generic ones. It is safe for concurrent use.
type Classifier struct {
	def      *Definition
	once     sync.Once
	compiled map[Category][]*regexp.Regexp
}

// NewClassifier returns the classifier of def (nil def: generic only).
func NewClassifier(def *Definition) *Classifier { return &Classifier{def: def} }

func (c *Classifier) init() {
	c.compiled = map[Category][]*regexp.Regexp{}
	for _, cat := range CategoryOrder {
		var list []string
		if c.def != nil {
			list = append(list, c.def.Errors.byCategory(cat)...)
		}
		list = append(list, generic.byCategory(cat)...)
		for _, p := range list {
			if re, err := compilePattern(p); err == nil {
				c.compiled[cat] = append(c.compiled[cat], re)
			}
		}
	}
}

// Match returns the category of text, or "" when nothing matches. Strings
// shorter than 7 characters are never matched.
func (c *Classifier) Match(text string) Category {
	if len(strings.TrimSpace(text)) < 7 {
		return ""
	}
	c.once.Do(c.init)
	// The definition's own patterns take precedence over generic ones of
	// an earlier category: try the definition's first, in order.
	if c.def != nil {
		for _, cat := range CategoryOrder {
			for _, p := range c.def.Errors.byCategory(cat) {
				if re, err := compilePattern(p); err == nil && re.MatchString(text) {
					return cat
				}
			}
		}
	}
	for _, cat := range CategoryOrder {
		for _, re := range c.compiled[cat] {
			if re.MatchString(text) {
				return cat
			}
		}
	}
	return ""
}

// FromStatus maps an HTTP status to a category ("" when it says nothing).
func FromStatus(status int) Category {
	switch {
	case status == 401:
		return AuthExpired
	case status == 403:
		return PermissionDenied
	case status == 400 || status == 422:
		return InvalidRequest
	case status == 413:
		return TokenExhaustion
	case status == 429 || status == 529:
		return RateLimited
	case status >= 500:
		return NetworkError
	}
	return ""
}

var badRequest = regexp.MustCompile(`(?i)invalid_request|bad request|INVALID_ARGUMENT`)

var statusInText = regexp.MustCompile(`(?i)(?:api error:?\s*|status\s*(?:code)?\s*|"code":\s*|\bunexpected status\s+)(\d{3})\b`)

// StatusInText finds an HTTP status quoted in an error message.
func StatusInText(s string) int {
	if m := statusInText.FindStringSubmatch(s); m != nil {
		n, _ := strconv.Atoi(m[1])
		return n
	}
	return 0
}

// Classify builds the AgentError of a structured error payload (message
// and, when known, the HTTP status, else a status quoted in the message).
// A status that names a category wins; otherwise the patterns decide, and
// an unmatched payload is Unknown (a structured API error is not a crash).
func (c *Classifier) Classify(message string, status int) *AgentError {
	if status == 0 {
		status = StatusInText(message)
	}
	e := &AgentError{Message: strings.TrimSpace(message), Source: "stream", Status: status, ExitCode: -1}
	byStatus := FromStatus(status)
	switch {
	case byStatus != "" && byStatus != InvalidRequest:
		e.Category = byStatus
	case c.Match(message) != "":
		// A 400 may still say why: "prompt is too long", a dead session.
		e.Category = c.Match(message)
	case byStatus != "":
		e.Category = byStatus
	case badRequest.MatchString(message):
		e.Category = InvalidRequest
	default:
		e.Category = Unknown
	}
	if e.Category == RateLimited {
		e.RetryAt = parseReset(message, time.Now())
	}
	return e
}

// ClassifyExit classifies a non-zero exit: the definition's exit-code
// table, then stderr + "\n" + stdout tail against the patterns, else
// agent_crashed "Agent exited with code N" with the first meaningful
// stderr line. Usage and help text the CLI printed is left out of both
// (withoutUsage): it describes options, not the failure.
func (c *Classifier) ClassifyExit(code int, stderr, stdoutTail string) *AgentError {
	stderr, stdoutTail = withoutUsage(stripANSI(stderr)), withoutUsage(stripANSI(stdoutTail))
	text := strings.TrimSpace(stderr + "\n" + stdoutTail)
	e := &AgentError{Source: "exit", ExitCode: code, Message: firstLine(stderr)}
	if c.def != nil {
		if cat, ok := c.def.ExitCodes[strconv.Itoa(code)]; ok {
			e.Category = cat
		}
	}
	if e.Category == "" {
		e.Category = c.Match(text)
		if e.Category != "" {
			e.Source = "stderr"
		}
	}
	if e.Category == "" {
		e.Category = AgentCrashed
		msg := fmt.Sprintf("Agent exited with code %d", code)
		if e.Message != "" {
			msg += ": " + e.Message
		}
		e.Message = msg
	}
	if e.Message == "" {
		e.Message = fmt.Sprintf("Agent exited with code %d", code)
	}
	return e
}

var (
	// usageHead opens a usage or help text ("Usage: qwen [options]").
	usageHead = regexp.MustCompile(`(?i)^\s*usage:\s`)
	// sectionHead is a help section ("Options:", "Positionals:").
	sectionHead = regexp.MustCompile(`(?i)^((global |common )?(options|flags|commands|subcommands|positionals|arguments)|examples?):$`)
)

// withoutUsage removes the usage and help text from a CLI's output: from a
// "Usage:" line or a section header ("Options:") on, the blank and
// indented lines that describe commands and options. What remains is the
// CLI's own message, such as the argument error yargs prints after its
// help ("Not enough arguments following: p"). Qwen's help mentions
// "429/503/529" once; classified as output, it made a usage error a
// retried rate limit.
func withoutUsage(s string) string {
	var out, preamble []string
	state := 0 // 0: the CLI's text, 1: after "Usage:", 2: in a section
	for _, l := range strings.Split(s, "\n") {
		t := strings.TrimSpace(l)
		switch {
		case usageHead.MatchString(l):
			out, preamble, state = append(out, preamble...), nil, 1
			continue
		case sectionHead.MatchString(t):
			preamble, state = nil, 2 // the usage's description is help too
			continue
		case state == 1:
			preamble = append(preamble, l)
			continue
		case state == 2 && (t == "" || strings.TrimLeft(l, " \t") != l):
			continue
		}
		state = 0
		out = append(out, l)
	}
	// A "Usage:" line no section followed: only that line was help.
	return strings.Join(append(out, preamble...), "\n")
}

var ansiRE = regexp.MustCompile(`\x1b\[[0-9;]*[A-Za-z]`)

func stripANSI(s string) string { return ansiRE.ReplaceAllString(s, "") }

// noise are stderr lines that never explain a failure.
var noise = regexp.MustCompile(`(?i)^(warning:|yolo mode|\[startup\]|reading additional input|\d+\s*\|)|256-color|ripgrep is not available|could not create path aliases`)

func firstLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		l = strings.TrimSpace(l)
		if l != "" && !noise.MatchString(l) {
			if len(l) > 300 {
				l = l[:300]
			}
			return l
		}
	}
	return ""
}

var (
	planQuota = regexp.MustCompile(`(?i)usage[\s-]?limit|quota.*exceeded|hit your.*limit|plan\s+limit|weekly\s+limit|5[\s-]?hour\s+limit|limit\s+reached|out of (credits|tokens)|insufficient.*(quota|credit|balance)|resets?\s+(at|on|in)`)
	resetIn   = regexp.MustCompile(`(?i)resets?\s+in\s+(\d+)\s*(s|sec|seconds?|m|min|minutes?|h|hours?)\b`)
)

// IsPlanQuota reports whether a rate-limit message is a plan quota (wait
// for the reset) rather than a transient limit (back off).
func IsPlanQuota(msg string) bool { return planQuota.MatchString(msg) }

// parseReset extracts "resets in N unit" relative to now (zero if absent).
func parseReset(msg string, now time.Time) time.Time {
	m := resetIn.FindStringSubmatch(msg)
	if m == nil {
		return time.Time{}
	}
	n, _ := strconv.Atoi(m[1])
	unit := time.Second
	switch strings.ToLower(m[2])[0] {
	case 'm':
		unit = time.Minute
	case 'h':
		unit = time.Hour
	}
	return now.Add(time.Duration(n) * unit)
}
