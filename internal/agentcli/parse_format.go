package agentcli

import "encoding/json"

// Every CLI stream is JSON Lines of event envelopes: an object whose
// "type" names the event. The five parsers share one shape, written once
// here: a line is decoded with encoding/json into the format's line
// struct, then handed to the handler registered for its type. The CLIs
// write a few lines a second (kilobytes per second), so decoding each line
// with reflection costs microseconds against milliseconds between lines
// (docs/agent-clis.md, "Parser cost").

// lineResult is what a format made of one line.
type lineResult int

const (
	lineOK      lineResult = iota
	lineUnknown            // a JSON object of an unknown event type (or with a field of the wrong type)
	lineNonJSON            // not a JSON object whose "type" is a string
)

// envelope is the part every CLI event shares; each line struct embeds it.
type envelope struct {
	Type string `json:"type"`
}

func (e *envelope) eventType() string { return e.Type }

// handler handles one decoded line of its event type; false counts the
// line as unknown (a required part is missing or of an unknown kind). raw
// is the line as read.
type handler[P any] func(st *state, l P, raw []byte) bool

// format is one CLI's stream: its line struct L (P is *L), a handler per
// event type, and what is closed at the end of the stream.
type format[L any, P interface {
	*L
	eventType() string
}] struct {
	// each, when set, sees every decoded line before its handler (of any
	// type, unknown ones included): where a CLI puts the session id on
	// every line.
	each   func(st *state, l P)
	on     map[string]handler[P]
	finish func(st *state)
}

// line decodes raw into a new L and dispatches it on its type. A line
// encoding/json cannot decode is non-JSON when not even its "type" decodes
// as a string, else unknown (a known field of the wrong type).
func (f format[L, P]) line(st *state, raw []byte) lineResult {
	l := P(new(L))
	if err := json.Unmarshal(raw, l); err != nil {
		var head envelope
		if json.Unmarshal(raw, &head) != nil {
			return lineNonJSON
		}
		return lineUnknown
	}
	if f.each != nil {
		f.each(st, l)
	}
	h, ok := f.on[l.eventType()]
	if !ok || !h(st, l, raw) {
		return lineUnknown
	}
	return lineOK
}

func (f format[L, P]) end(st *state) {
	if f.finish != nil {
		f.finish(st)
	}
}

// ignore is the handler of the event types a format reads past.
func ignore[P any](*state, P, []byte) bool { return true }

// on registers h for each of types in m.
func on[P any](m map[string]handler[P], h handler[P], types ...string) {
	for _, t := range types {
		m[t] = h
	}
}
