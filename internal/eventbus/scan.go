package eventbus

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/session"
)

// Most records of a session log map to no platform event (conversation
// messages, response chunks, tool output). skimRecord reads what decides
// that from the start of the line as internal/session writes it
// ({"cursor":N,"time":"…","kind":"…","event":{"type":"…",…}}) without
// decoding the record, so the follower decodes only the records that
// become events. A line in any other shape is decoded in full.

var (
	skimCursor = []byte(`{"cursor":`)
	skimTime   = []byte(`,"time":"`)
	skimKind   = []byte(`","kind":"`)
	skimEvent  = []byte(`","event":{"type":"`)
)

// skimRecord returns the record's cursor and whether it may map to an
// event (mapped); ok is false when the line is not in the shape above
// (decode it).
func skimRecord(line []byte) (cursor int64, mapped, ok bool) {
	rest, found := bytes.CutPrefix(line, skimCursor)
	if !found {
		return 0, false, false
	}
	end := bytes.IndexByte(rest, ',')
	if end <= 0 {
		return 0, false, false
	}
	cursor, err := strconv.ParseInt(string(rest[:end]), 10, 64)
	if err != nil {
		return 0, false, false
	}
	if rest, found = bytes.CutPrefix(rest[end:], skimTime); !found {
		return 0, false, false
	}
	// An RFC 3339 time has no quote or backslash.
	end = bytes.IndexByte(rest, '"')
	if end < 0 {
		return 0, false, false
	}
	rest = rest[end:]
	if rest, found = bytes.CutPrefix(rest, skimKind); !found {
		return 0, false, false
	}
	if !bytes.HasPrefix(rest, []byte(session.KindEvent+`"`)) {
		// A message or a run event: never mapped. A kind with an escape
		// or of another length is decoded to be sure.
		end = bytes.IndexByte(rest, '"')
		if end < 0 || bytes.IndexByte(rest[:end], '\\') >= 0 {
			return 0, false, false
		}
		return cursor, false, true
	}
	if rest, found = bytes.CutPrefix(rest[len(session.KindEvent):], skimEvent); !found {
		return 0, false, false
	}
	end = bytes.IndexByte(rest, '"')
	if end < 0 || bytes.IndexByte(rest[:end], '\\') >= 0 {
		return 0, false, false
	}
	switch string(rest[:end]) {
	case protocol.TypeReady, protocol.TypeToolCall, protocol.TypeToolEnd, protocol.TypeServerRequest:
		return cursor, true, true
	}
	return cursor, false, true
}

// decodeMapped decodes a record skimRecord found mapped, as decodeRecord
// does, without reflection: the record's fields in the order
// internal/session writes them, the event last, and the event's members
// that frame reads (decodeRecord cost 3.4 µs a tool call record, most of
// the follower's time on a record). The line must be valid JSON (checked
// first, as decoding checks it); false leaves the record to decodeRecord:
// a line in another shape, a time that does not parse, a member of frame
// whose value is escaped or of another type, a key that matches one of
// frame's only case-insensitively.
func decodeMapped(line []byte, rec *logRecord) bool {
	if !json.Valid(line) {
		return false
	}
	rest, found := bytes.CutPrefix(line, skimCursor)
	if !found {
		return false
	}
	end := bytes.IndexByte(rest, ',')
	if end <= 0 {
		return false
	}
	cursor, err := strconv.ParseInt(string(rest[:end]), 10, 64)
	if err != nil {
		return false
	}
	if rest, found = bytes.CutPrefix(rest[end:], skimTime); !found {
		return false
	}
	if end = bytes.IndexByte(rest, '"'); end < 0 {
		return false
	}
	t, err := time.Parse(time.RFC3339Nano, string(rest[:end]))
	if err != nil {
		return false
	}
	if rest, found = bytes.CutPrefix(rest[end:], mappedKind); !found {
		return false
	}
	var f frame
	n, ok := parseFrame(rest, &f)
	if !ok || string(bytes.TrimRight(rest[n:], "\r\n")) != "}" {
		return false
	}
	*rec = logRecord{Cursor: cursor, Time: t, Kind: session.KindEvent, Event: f}
	return true
}

var mappedKind = []byte(`","kind":"` + session.KindEvent + `","event":`)

// frameKeys are the members parseFrame reads (frame's json names).
var frameKeys = []string{"type", "call_id", "tool", "requires_approval", "success", "error_code",
	"request_id", "request_type", "model", "provider", "executor_type"}

// parseFrame reads a JSON object (valid JSON, json.Valid) into f and
// returns its length; false when a member of frame is not a plain
// string (or a boolean for the booleans) or a key is one of frame's but
// for its case (encoding/json matches keys case-insensitively).
func parseFrame(b []byte, f *frame) (int, bool) {
	if len(b) < 2 || b[0] != '{' {
		return 0, false
	}
	i := 1
	if b[i] == '}' {
		return i + 1, true
	}
	for {
		key, next, ok := plainString(b, i)
		if !ok || next >= len(b) || b[next] != ':' {
			return 0, false
		}
		i = next + 1
		var s *string
		var flag *bool
		switch key {
		case "type":
			s = &f.Type
		case "call_id":
			s = &f.CallID
		case "tool":
			s = &f.Tool
		case "error_code":
			s = &f.ErrorCode
		case "request_id":
			s = &f.RequestID
		case "request_type":
			s = &f.RequestType
		case "model":
			s = &f.Model
		case "provider":
			s = &f.Provider
		case "executor_type":
			s = &f.ExecutorType
		case "requires_approval":
			flag = &f.RequiresApproval
		case "success":
			flag = &f.Success
		default:
			for _, k := range frameKeys {
				if strings.EqualFold(k, key) {
					return 0, false
				}
			}
		}
		switch {
		case s != nil:
			v, next, ok := plainString(b, i)
			if !ok {
				return 0, false
			}
			*s, i = v, next
		case flag != nil:
			switch {
			case bytes.HasPrefix(b[i:], []byte("true")):
				*flag, i = true, i+4
			case bytes.HasPrefix(b[i:], []byte("false")):
				*flag, i = false, i+5
			default:
				return 0, false
			}
		default:
			i = skipValue(b, i)
		}
		if i >= len(b) {
			return 0, false
		}
		switch b[i] {
		case ',':
			i++
		case '}':
			return i + 1, true
		default:
			return 0, false
		}
	}
}

// plainString reads the JSON string at b[i], which has no escape, and
// returns it and the index after it.
func plainString(b []byte, i int) (string, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return "", 0, false
	}
	end := bytes.IndexByte(b[i+1:], '"')
	if end < 0 {
		return "", 0, false
	}
	// An escape is decoded, invalid UTF-8 replaced, by encoding/json.
	if v := b[i+1 : i+1+end]; bytes.IndexByte(v, '\\') >= 0 || !utf8.Valid(v) {
		return "", 0, false
	}
	return string(b[i+1 : i+1+end]), i + end + 2, true
}

// skipValue returns the index after the JSON value at b[i] (valid JSON).
func skipValue(b []byte, i int) int {
	depth := 0
	for ; i < len(b); i++ {
		switch c := b[i]; c {
		case '"':
			for i++; i < len(b) && b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i
			}
			depth--
		case ',':
			if depth == 0 {
				return i
			}
		}
		if depth == 0 && (b[i] == '"' || b[i] == '}' || b[i] == ']') {
			return i + 1
		}
	}
	return i
}
