package hostedrunner

import (
	"errors"
	"io"
	"sync"

	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/session"
)

// sessionLog is the runtime's log (runtime.Log): the session's JSONL log,
// with cursors offset by base so that a restored runner continues after
// the manifest's cursor. After Flush the log is synced and later frames
// are numbered in memory only (a drained runner publishes nothing that
// must survive it); it stays open for Export until Close.
type sessionLog struct {
	mu      sync.Mutex
	sess    *session.Session
	file    string
	base    int64
	cursor  int64
	flushed bool
}

func newSessionLog(s *session.Session, restored int64) *sessionLog {
	l := &sessionLog{sess: s}
	if s != nil {
		l.file = s.LogPath()
		l.cursor = s.Cursor()
	}
	if restored > l.cursor {
		l.base = restored - l.cursor
		l.cursor = restored
	}
	return l
}

// Event implements runtime.Log.
func (l *sessionLog) Event(m protocol.Message) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sess != nil && !l.flushed {
		l.sess.Event(m)
	}
	l.cursor++
}

// Message implements runtime.Log.
func (l *sessionLog) Message(m llm.Message) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sess != nil && !l.flushed {
		l.sess.Message(m)
	}
	l.cursor++
}

// Cursor implements runtime.Log.
func (l *sessionLog) Cursor() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cursor
}

// SetTitle records the session title (the runtime's first prompt).
func (l *sessionLog) SetTitle(title string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sess == nil {
		return nil
	}
	return l.sess.SetTitle(title)
}

// errNoLog is the flush error of a runner without a session log.
var errNoLog = errors.New("no session log")

// Flush syncs the session log and ends its recording. It reports the
// first write failure of the log, or of the sync.
func (l *sessionLog) Flush() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sess == nil {
		if l.file == "" {
			return errNoLog
		}
		return nil // already closed
	}
	if l.flushed {
		return nil
	}
	l.flushed = true
	return l.sess.Sync()
}

// Export copies the log to w.
func (l *sessionLog) Export(w io.Writer) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sess == nil {
		return errNoLog
	}
	return l.sess.ExportTo(w)
}

// Close closes the session log (its metadata is rewritten).
func (l *sessionLog) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sess == nil {
		return nil
	}
	err := l.sess.Close()
	l.sess = nil
	return err
}
