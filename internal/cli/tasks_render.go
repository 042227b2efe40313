package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/maestro-run/maestro/internal/api"
	"github.com/maestro-run/maestro/internal/engine"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/store"
)

// jobLog prints a job's event log, page after page or event after event as
// an SSE stream delivers them. With asJSON it writes every event as one
// line of JSON, exactly as the API sent it. Otherwise the log's events go
// to the renderer `maestro run` draws a run with, so a job looks as a run
// does: the protocol messages and run events of its runs, and the job's
// own facts (status changes, comments, events of other kinds) as lines
// stamped with their time and event number (`15:04:05 #3 status running`).
// Everything goes to Out (a log is read as one stream); ANSI styles only
// when Out is a terminal without NO_COLOR.
type jobLog struct {
	*renderer
	w      io.Writer
	asJSON bool
}

func newJobLog(ios *IOStreams, asJSON bool) *jobLog {
	r := &renderer{text: ios.Out, info: ios.Out, st: newStyles(outColor(ios)), loc: time.Local, tools: map[string]*toolView{}}
	return &jobLog{renderer: r, w: ios.Out, asJSON: asJSON}
}

// outColor reports whether `tasks` output on ios.Out is styled: a
// terminal, and NO_COLOR not set.
func outColor(ios *IOStreams) bool {
	return ios.OutTTY && (ios.Getenv == nil || ios.Getenv("NO_COLOR") == "")
}

// add prints one event; raw is its JSON as the API sent it.
func (l *jobLog) add(raw []byte, e store.JobEvent) {
	if l.asJSON {
		var buf bytes.Buffer
		if json.Compact(&buf, raw) != nil {
			buf.Reset()
			buf.Write(bytes.TrimSpace(raw))
		}
		buf.WriteByte('\n')
		l.w.Write(buf.Bytes())
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	stamp := fmt.Sprintf("%s%s #%d%s ", l.st.dim, e.CreatedAt.In(l.loc).Format("15:04:05"), e.Seq, l.st.reset)
	switch e.Type {
	case store.JobEventStatus:
		var s store.StatusEvent
		json.Unmarshal(e.Data, &s)
		l.jobStatus(s, e.CreatedAt, stamp)
	case store.JobEventComment:
		var c api.CommentEvent
		json.Unmarshal(e.Data, &c)
		l.comment(c, stamp)
	case store.JobEventRunEvent:
		var rec engine.Record
		if json.Unmarshal(e.Data, &rec) != nil {
			l.rawEvent(e, stamp)
			return
		}
		l.runEvent(rec.Event)
	case store.JobEventProtocol:
		m, err := protocol.DecodeServer(e.Data)
		if err != nil {
			l.rawEvent(e, stamp)
			return
		}
		l.protocol(m, e.CreatedAt, stamp)
	default:
		l.rawEvent(e, stamp)
	}
}

// rawEvent draws an event of a kind this build does not know: its type,
// the kind of a run event ({"kind", "data"}) or the type of a protocol
// message ({"type", …}), and its data.
func (l *jobLog) rawEvent(e store.JobEvent, stamp string) {
	label, body := string(e.Type), []byte(e.Data)
	var inner struct {
		Kind string          `json:"kind"`
		Type string          `json:"type"`
		Data json.RawMessage `json:"data"`
	}
	if json.Unmarshal(e.Data, &inner) == nil {
		switch {
		case inner.Kind != "":
			label += " " + inner.Kind
			if len(inner.Data) > 0 {
				body = inner.Data
			}
		case inner.Type != "":
			label += " " + inner.Type
		}
	}
	l.raw(stamp, label, body)
}

// close ends a pending line of assistant text.
func (l *jobLog) close() {
	if !l.asJSON {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.endText()
	}
}
