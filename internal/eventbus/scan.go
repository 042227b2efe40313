package eventbus

import (
	"bytes"
	"strconv"

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
