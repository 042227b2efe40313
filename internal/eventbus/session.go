package eventbus

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/session"
	"github.com/maestro-run/maestro/internal/tool"
)

// The files a follower keeps in a session's directory, beside its log.
const (
	// cursorFile is the publish cursor (sessionState).
	cursorFile = "eventbus.json"
	// closeFile asks for the session's closed event (closeMark): written
	// when the session closes, removed once the event is published.
	closeFile = "eventbus-close.json"
	logFile   = "events.jsonl"
	// subtasksFile, in a piece session's directory, says that a subtask
	// of its runs closed with events left to publish (markParent).
	subtasksFile = "eventbus-subtasks"
	// saveEvery is how many events a follower publishes between two
	// saves of its cursor; a crash re-sends at most these, which
	// JetStream drops as duplicates. Records that map to no event cost a
	// skim to read again: the cursor is saved every saveEveryRecord of
	// them (a record is rarely an event: counting records saved the
	// cursor several times a session, each a file write).
	saveEvery       = 1024
	saveEveryRecord = 16 * saveEvery
	// saveIdle is how often at most a follower that caught up saves its
	// cursor.
	saveIdle = time.Second
)

// sessionState is a session's publish cursor: every record up to Cursor
// (the log's first Offset bytes) is published.
type sessionState struct {
	Cursor int64 `json:"cursor"`
	Offset int64 `json:"offset"`
	// Started: the session's started event is published (a later ready
	// is a resume).
	Started bool `json:"started,omitempty"`
	// Calls are the tool calls in flight (call id → tool).
	Calls map[string]string `json:"calls,omitempty"`
	// Closed is the cursor of the last published closed event.
	Closed int64 `json:"closed,omitempty"`
	// Open: a ready (started or resumed) is published and no closed or
	// suspended since. A session open on the bus whose process ended
	// without closing it gets its closed event from the next process
	// (publishEnded).
	Open bool `json:"open,omitempty"`
	// Correlation is the session's, from the environment of the process
	// that first followed it, so a later process publishes its backlog
	// with the same ids.
	Correlation *Correlation `json:"correlation,omitempty"`
	// SessionID is the session's id on the bus when it is not its log's
	// (the directory's name): the id the caller gave in meta.ID, e.g. a
	// hosted runner's session id, which a restored runner continues.
	SessionID string `json:"session_id,omitempty"`
	// NoReady: the log has no ready record (a piece run's subtask's,
	// NoReady): the session's started event goes out with its first
	// record, from its metadata.
	NoReady bool `json:"no_ready,omitempty"`
}

// closeMark asks for the closed event of a session closed at Cursor.
type closeMark struct {
	Cursor int64  `json:"cursor"`
	Reason string `json:"reason"`
	// Time is when the session closed: the closed event's time,
	// whenever it is published (NATS may be down for hours).
	Time time.Time `json:"time,omitzero"`
}

// Follower publishes one session's log as it grows.
type Follower struct {
	b      *Bus
	dir    string
	meta   session.Meta
	closeC chan struct{}
	done   chan struct{}
	// restored: the session continues a suspended one from cursor from
	// (FollowRestored).
	restored bool
	from     int64
	// marked: Closing wrote the close mark.
	marked bool
	// id is the session's id on the bus (event ids, data.session_id):
	// meta.ID, kept in the state when it is not the log's
	// (sessionState.SessionID) for later processes.
	id string
	// catchUp, when set, is a session store caught up (Bus.CatchUp)
	// before the session is published (AfterCatchUp).
	catchUp string
	// noReady: the log has no ready record (NoReady).
	noReady bool
}

// idAt is the base of the ids of the events of the record at cursor:
// <session id>.<cursor>, or <session id>.<log id>.<cursor> for a session
// published under an id that is not its log's (a hosted runner's: one
// restored from a drain, or one started again under the same
// MAESTRO_SESSION_ID). Several logs then share the session id, each
// numbering its records from its own start, and JetStream would drop a
// later log's events as duplicates of an earlier one's.
func (f *Follower) idAt(cursor int64) string {
	if log := filepath.Base(f.dir); f.id != log {
		return f.id + "." + log + "." + strconv.FormatInt(cursor, 10)
	}
	return f.id + "." + strconv.FormatInt(cursor, 10)
}

// FollowOption adjusts how FollowSession and FollowRestored follow a
// session.
type FollowOption func(*Follower)

// AfterCatchUp makes the follower first catch up on the session logs of
// storeDir (Bus.CatchUp, its own session skipped) and only then publish
// its session: a process that starts where an earlier one died (a hosted
// runner restarted on its state directory, which no other process
// catches up on) publishes the dead session's closed before its own
// started or resumed.
func AfterCatchUp(storeDir string) FollowOption {
	return func(f *Follower) { f.catchUp = storeDir }
}

// NoReady follows a session whose log has no ready record (a piece
// run's subtask, whose log the engine writes): its started event is
// published with its first record, from the session's metadata (model,
// provider, executor type), so a consumer sees it start, and, should
// its process die, the next process closes it (publishEnded) as it does
// any session's. Without it such a session published tool calls and a
// closed event but never started.
func NoReady() FollowOption {
	return func(f *Follower) { f.noReady = true }
}

// FollowSession starts publishing the log of the session in dir (its
// directory in the session store) from its persisted cursor. Call Close
// when the session closes.
func (b *Bus) FollowSession(dir string, meta session.Meta, opts ...FollowOption) *Follower {
	return b.follow(&Follower{b: b, dir: dir, meta: meta, id: meta.ID, closeC: make(chan struct{}), done: make(chan struct{})}, opts)
}

// FollowRestored follows, as FollowSession, the log of a session
// restored from a suspended one (a hosted runner's restore from a drain's
// manifest) whose records up to cursor were published by the suspended
// session's process: they are skipped, and
// maestro.sessions.session.resumed is published first. meta.ID is the
// suspended session's id (the restored log has its own): its events on
// the bus continue the suspended session's.
func (b *Bus) FollowRestored(dir string, meta session.Meta, cursor int64, opts ...FollowOption) *Follower {
	return b.follow(&Follower{b: b, dir: dir, meta: meta, id: meta.ID, closeC: make(chan struct{}), done: make(chan struct{}), restored: true, from: cursor}, opts)
}

func (b *Bus) follow(f *Follower, opts []FollowOption) *Follower {
	for _, o := range opts {
		o(f)
	}
	dir, meta := f.dir, f.meta
	if !b.claim(dir) {
		close(f.done) // followed already by this process
		return f
	}
	b.spawn(func() {
		defer close(f.done)
		defer b.release(dir)
		if f.catchUp != "" {
			// This session's own directory is claimed: skipped.
			if err := b.CatchUp(b.ctx, f.catchUp); err != nil && b.ctx.Err() == nil {
				b.log.Warn("event bus: catch up on the session logs before following a session", "dir", f.catchUp, "session", meta.ID, "err", err)
			}
		}
		// A resumed piece session's earlier runs may have subtasks a
		// dead process left open: closed before this session's resume.
		if err := b.catchUpSubtasks(b.ctx, dir); err != nil && b.ctx.Err() == nil {
			b.log.Warn("event bus: catch up on the session's subtask logs", "session", meta.ID, "err", err)
		}
		if err := f.run(b.ctx, true); err != nil && !errors.Is(err, context.Canceled) {
			b.log.Warn("event bus: follow session log", "session", meta.ID, "err", err)
		}
	})
	return f
}

// Closing records that the session closes after its record cursor (the
// log is complete) and why: reason is "completed", "user_stopped",
// "error", "idle_timeout" (close_reason) or ReasonSuspended. Call it before the session's
// log is released (session.Session.Close), so that another process
// catching up never takes a session closing for one whose process died
// (publishEnded); Close then only waits.
func (f *Follower) Closing(cursor int64, reason string) {
	f.marked = true
	if err := writeJSON(filepath.Join(f.dir, closeFile), closeMark{Cursor: cursor, Reason: reason, Time: time.Now().UTC()}); err != nil {
		f.b.log.Warn("event bus: record the session's close", "session", f.meta.ID, "err", err)
	}
}

// end records the close, unless Closing did, and tells the follower to
// publish what is left and stop: what Close and CloseLater both do
// before they wait or not.
func (f *Follower) end(cursor int64, reason string) {
	if !f.marked {
		f.Closing(cursor, reason)
	}
	select {
	case <-f.closeC:
	default:
		close(f.closeC)
	}
}

// Close records the close as Closing does, unless Closing did, so the
// closed event follows the session's last record, and waits up to
// Options.CloseWait for the events to be published, and for those of
// its subtasks closed with CloseLater. Events not published by then
// stay in the logs for Bus.CatchUp.
func (f *Follower) Close(cursor int64, reason string) {
	f.end(cursor, reason)
	ctx, cancel := context.WithTimeout(context.Background(), f.b.o.CloseWait)
	defer cancel()
	select {
	case <-f.done:
	case <-ctx.Done():
		f.b.log.Warn("event bus: session closed before its events were published; the next Maestro process publishes them", "session", f.meta.ID)
	}
	if f.noReady {
		f.markParent()
	}
	// Its subtasks closed later (CloseLater), within the same wait.
	f.b.waitLater(ctx, f.dir)
}

// CloseLater records the close as Close does and returns at once (a
// piece run's subtask, whose result its parent waits for: Close held it
// up by CloseWait while NATS was down). The follower goes on publishing
// in the background while the bus is open, so the closed event goes out
// when NATS comes back within the process's life; the close of the
// session whose run directory holds this log (the subtask's parent,
// Close) waits for it within its own CloseWait, and marks the parent
// for the next process's catch-up when it is not out by then.
func (f *Follower) CloseLater(cursor int64, reason string) {
	f.end(cursor, reason)
	b := f.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.active[f.dir] { // still publishing (release takes it off)
		b.later[f.dir] = f
	}
}

// waitLater waits, until ctx ends, for the followers closed with
// CloseLater whose logs are under dir (a parent session's subtasks);
// each not done by then marks its parent (markParent).
func (b *Bus) waitLater(ctx context.Context, dir string) {
	b.mu.Lock()
	var subs []*Follower
	for d, f := range b.later {
		if strings.HasPrefix(d, dir+string(filepath.Separator)) {
			subs = append(subs, f)
		}
	}
	b.mu.Unlock()
	for _, f := range subs {
		select {
		case <-f.done:
		case <-ctx.Done():
			b.log.Warn("event bus: subtask session closed before its events were published; the next Maestro process publishes them", "session", f.meta.ID)
			f.markParent()
		}
	}
}

// parentDir is the directory of the session whose piece run's subtask
// logs in dir (internal/engine's layout,
// <parent>/runs/<n>/subtasks/<NN-name>/logs/<session id>); "" when dir
// is not a subtask's.
func parentDir(dir string) string {
	parent := dir
	for _, want := range []string{"logs", "", "subtasks", "", "runs"} {
		parent = filepath.Dir(parent)
		if want != "" && filepath.Base(parent) != want {
			return "" // not a piece run's subtask
		}
	}
	return filepath.Dir(parent)
}

// markParent records in the parent session's directory that this
// subtask (NoReady, in the engine's layout, catchUpSubtasks) closed with
// events left to publish (its close mark is still there), so that the
// next process's catch-up takes up the parent's subtasks even when the
// parent itself has nothing left to publish (pending).
func (f *Follower) markParent() {
	if _, err := os.Stat(filepath.Join(f.dir, closeFile)); err != nil {
		return // published
	}
	parent := parentDir(f.dir)
	if parent == "" {
		return
	}
	if err := os.WriteFile(filepath.Join(parent, subtasksFile), nil, 0o600); err != nil {
		f.b.log.Warn("event bus: record the subtask's events left to publish in its parent session", "session", f.meta.ID, "err", err)
	}
}

// run publishes the log from the persisted cursor; with follow it keeps
// going until the session is closed (Close) and everything is published,
// without it (catch-up) it stops at the end of the log.
func (f *Follower) run(ctx context.Context, follow bool) error {
	stPath := filepath.Join(f.dir, cursorFile)
	var st sessionState
	if _, err := readJSON(stPath, &st); err != nil {
		return err
	}
	if st.SessionID != "" {
		f.id = st.SessionID
	}
	if st.Correlation == nil {
		env := f.b.o.Env
		env.SessionID = cmp.Or(f.meta.ClientSessionID, env.SessionID, f.meta.ID)
		env.AgentRunID = cmp.Or(env.AgentRunID, f.meta.AgentRunID)
		st.Correlation = &env
		if f.id != filepath.Base(f.dir) {
			st.SessionID = f.id // not the log's (a hosted runner's)
		}
		st.NoReady = f.noReady
		if f.restored {
			// The restored log holds the suspended session's records up
			// to f.from, its ready included: the resume is published
			// here, once, before the records after it.
			st.Cursor, st.Started, st.Open = max(st.Cursor, f.from), true, true
			ev := Event{ID: f.idAt(f.from) + ".resumed", Type: TypeSessionResumed, Time: time.Now().UTC(),
				Data: f.sessionData("resumed", map[string]any{"model": f.meta.Model, "provider": f.meta.Provider, "executor_type": f.meta.ExecutorType})}
			if err := f.b.publish(ctx, ev, *st.Correlation); err != nil {
				return err
			}
		}
		if err := writeJSON(stPath, st); err != nil {
			return err
		}
	}
	if st.Calls == nil {
		st.Calls = map[string]string{}
	}
	t := time.NewTicker(f.b.o.Poll)
	defer t.Stop()
	lr := &logReader{win: window{b: f.b}, path: filepath.Join(f.dir, logFile), saved: time.Now()}
	defer lr.close()
	defer func() {
		// Only a cursor whose events are all acknowledged is saved: after
		// a failure (or when the bus closes) the cursor stays where it was
		// and the events after it are sent again (duplicates, dropped).
		if len(lr.win.pending) == 0 {
			if err := lr.save(ctx, stPath, &st); err != nil {
				f.b.log.Warn("event bus: save the publish cursor", "session", f.meta.ID, "err", err)
			}
		}
	}()
	for {
		closing := !follow
		select {
		case <-f.closeC:
			closing = true
		default:
		}
		n, err := f.pass(ctx, &st, stPath, lr)
		if err == nil {
			// The pass's events are sent; wait for their
			// acknowledgements (one wait for a whole pass).
			err = lr.win.flush(ctx)
		}
		if err != nil {
			return err
		}
		if n > 0 && closing {
			continue // read on to the end of the log before the close
		}
		// The cursor is saved at most every saveIdle (and every
		// saveEvery events while the log grows, and when the follower
		// stops), not after every record.
		if closing {
			// Every event is acknowledged: the close's own write of the
			// state saves the cursor too (one write, not two).
			if err := f.publishClose(ctx, &st, stPath, st.Cursor, lr); err != nil {
				return err
			}
			// Catching up on a session its process left open on the bus
			// (it died, or ran without the bus): close it, unless a
			// process has opened it since.
			if !follow && st.Open && !inUse(f.dir) {
				if err := f.publishEnded(ctx, &st, lr); err != nil {
					return err
				}
			}
			return lr.save(ctx, stPath, &st)
		}
		if time.Since(lr.saved) >= saveIdle {
			if err := lr.save(ctx, stPath, &st); err != nil {
				return err
			}
		}
		// A pass reads the log to its end, so the next one waits for the
		// next poll even when this one found records: a follower makes
		// at most one pass (one read of the log, one batch of publishes,
		// one wait for their acknowledgements) per poll while its session
		// writes, rather than chasing every record as it is written
		// (docs/events.md, "Figures").
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		case <-f.closeC:
		}
	}
}

// logReader reads a session log from a publish cursor across passes:
// the file stays open and its buffer is reused.
type logReader struct {
	win  window
	path string
	file *os.File
	br   *bufio.Reader
	long []byte // a line longer than br's buffer (line)
	// unsaved records and events were published since the cursor was
	// last saved.
	unsaved, events int
	saved           time.Time
}

// at positions the reader at offset, opening the log the first time;
// false when the log does not exist yet.
func (lr *logReader) at(offset int64) (bool, error) {
	if lr.file == nil {
		file, err := os.Open(lr.path)
		if errors.Is(err, os.ErrNotExist) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("open session log: %w", err)
		}
		lr.file, lr.br = file, bufio.NewReaderSize(file, 1<<16)
	}
	if _, err := lr.file.Seek(offset, io.SeekStart); err != nil {
		return false, fmt.Errorf("read session log: %w", err)
	}
	lr.br.Reset(lr.file)
	return true, nil
}

// save writes the cursor when records were published since it was last
// written, once every event sent is acknowledged.
func (lr *logReader) save(ctx context.Context, stPath string, st *sessionState) error {
	if lr.unsaved == 0 {
		return nil
	}
	if err := lr.win.flush(ctx); err != nil {
		return err
	}
	lr.unsaved, lr.events, lr.saved = 0, 0, time.Now()
	return writeJSON(stPath, st)
}

// maxKeptLine is the largest record whose copy a logReader keeps for the
// next long one.
const maxKeptLine = 1 << 20

// line returns the next line of the log, its newline included (no
// newline: the end of the log, or a record being written), as ReadBytes
// would but without a copy of each line: it is the reader's buffer, or
// for a line longer than the buffer lr.long, valid until the next call.
// The mapping copies what it keeps (decodeRecord's strings).
func (lr *logReader) line() ([]byte, error) {
	line, err := lr.br.ReadSlice('\n')
	if !errors.Is(err, bufio.ErrBufferFull) {
		return line, err
	}
	if cap(lr.long) > maxKeptLine {
		lr.long = nil
	}
	lr.long = append(lr.long[:0], line...)
	for errors.Is(err, bufio.ErrBufferFull) {
		line, err = lr.br.ReadSlice('\n')
		lr.long = append(lr.long, line...)
	}
	return lr.long, err
}

func (lr *logReader) close() {
	if lr.file != nil {
		lr.file.Close()
	}
}

// logRecord is what the follower reads of a session record, decoded in
// one pass with the protocol message's mapped fields: a conversation
// message is skipped, not decoded.
type logRecord struct {
	Cursor int64     `json:"cursor"`
	Time   time.Time `json:"time"`
	Kind   string    `json:"kind"`
	Event  frame     `json:"event"`
}

// decodeRecord decodes a record. A protocol message of another shape
// than frame's (decodeFrame) maps as far as it decodes; a record that is
// not JSON or whose own fields do not decode is corrupt.
func decodeRecord(line []byte, rec *logRecord) error {
	err := json.Unmarshal(line, rec)
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && (te.Field == "event" || strings.HasPrefix(te.Field, "event.")) {
		return nil
	}
	return err
}

// pass publishes the records appended since st and returns how many it
// read.
func (f *Follower) pass(ctx context.Context, st *sessionState, stPath string, lr *logReader) (int, error) {
	if ok, err := lr.at(st.Offset); !ok {
		return 0, err
	}
	// A close recorded before a record (the session was resumed since)
	// is published before it; the mark is read once a pass.
	var mark closeMark
	marked, err := readJSON(filepath.Join(f.dir, closeFile), &mark)
	if err != nil {
		return 0, err
	}
	n := 0
	var rec logRecord // one for the pass: decoding into it allocates once
	for {
		line, err := lr.line()
		if len(line) == 0 || line[len(line)-1] != '\n' {
			break // the end, or a record being written
		}
		cursor, mapped, skimmed := skimRecord(line)
		rec = logRecord{}
		switch {
		case skimmed && (cursor <= st.Cursor || !mapped && (st.Started || !st.NoReady)):
			// (A log without a ready starts with its first record: that
			// record's time is read.)
			rec.Cursor = cursor
		case skimmed && decodeMapped(line, &rec):
		default:
			if jerr := decodeRecord(line, &rec); jerr != nil {
				return n, fmt.Errorf("session log %s: corrupt record after cursor %d: %w", f.dir, st.Cursor, jerr)
			}
		}
		if rec.Cursor > st.Cursor {
			if marked && mark.Cursor <= rec.Cursor-1 {
				if err := lr.win.flush(ctx); err != nil {
					return n, err
				}
				if err := f.publishClose(ctx, st, stPath, rec.Cursor-1, lr); err != nil {
					return n, err
				}
				marked = false
			}
			if st.Open && rec.Kind == session.KindEvent && rec.Event.Type == protocol.TypeReady {
				// A resume of a session whose previous process never
				// closed it: that run's closed comes first.
				if err := lr.win.flush(ctx); err != nil {
					return n, err
				}
				if err := f.publishEnded(ctx, st, lr); err != nil {
					return n, err
				}
			}
			for _, ev := range f.sessionEvents(rec, st) {
				if err := lr.win.add(ctx, ev, *st.Correlation); err != nil {
					return n, err
				}
				lr.events++
			}
			st.Cursor = rec.Cursor
		}
		st.Offset += int64(len(line))
		n++
		if lr.unsaved++; lr.events >= saveEvery || lr.unsaved >= saveEveryRecord {
			if err := lr.save(ctx, stPath, st); err != nil {
				return n, err
			}
		}
		if err != nil {
			break
		}
	}
	return n, nil
}

// publishClose publishes the closed event a close mark asks for once
// the log is published up to the mark (upTo is the last cursor
// published, every event before it acknowledged), then removes the mark.
// The state it writes is lr's saved cursor.
func (f *Follower) publishClose(ctx context.Context, st *sessionState, stPath string, upTo int64, lr *logReader) error {
	markPath := filepath.Join(f.dir, closeFile)
	var m closeMark
	ok, err := readJSON(markPath, &m)
	if err != nil || !ok || m.Cursor > upTo {
		return err
	}
	if st.Closed < m.Cursor {
		if m.Time.IsZero() { // a mark written before marks had a time
			m.Time = time.Now().UTC()
		}
		ev := Event{
			ID:   f.idAt(m.Cursor) + ".closed",
			Type: TypeSessionClosed, Time: m.Time,
			Data: f.sessionData("closed", map[string]any{"close_reason": closeReason(m.Reason)}),
		}
		if m.Reason == ReasonSuspended {
			ev.ID, ev.Type, ev.Data = f.idAt(m.Cursor)+".suspended", TypeSessionSuspended, f.sessionData("suspended", nil)
		}
		if err := f.b.publish(ctx, ev, *st.Correlation); err != nil {
			return err
		}
		st.Closed, st.Open = m.Cursor, false
		// The mark is done with once its event is acknowledged: its file
		// becomes the state's (replaceFrom), one file creation fewer a
		// close (docs/events.md, "Figures").
		if err := replaceFrom(markPath, stPath, st); err != nil {
			return err
		}
		lr.unsaved, lr.events, lr.saved = 0, 0, time.Now()
		return nil
	}
	if err := os.Remove(markPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", markPath, err)
	}
	return nil
}

// publishEnded publishes the closed event of a session open on the bus
// (st.Open) whose process ended without closing it, at its last record
// (st.Cursor), with that record's time: the same event (id, time, data)
// whichever process publishes it, the next one to catch up or the one
// resuming the session. The reason is error when the session's metadata
// was not written after that record (Session.Close writes it: the
// process died, e.g. SIGKILL), else completed (a process without the bus
// closed it).
func (f *Follower) publishEnded(ctx context.Context, st *sessionState, lr *logReader) error {
	t, err := recordTimeBefore(lr.file, st.Offset)
	if err != nil {
		return fmt.Errorf("session log %s: read the record at cursor %d: %w", f.dir, st.Cursor, err)
	}
	reason := "error"
	if !f.meta.UpdatedAt.Before(t) {
		reason = "completed"
	}
	// Its tool calls in flight never ended: they were cut short with
	// the process (CANCELLED, as an interrupt's), in the order of their
	// ids.
	idBase := f.idAt(st.Cursor)
	for _, id := range slices.Sorted(maps.Keys(st.Calls)) {
		ev := Event{ID: idBase + ".ended." + id, Type: TypeToolCallCompleted, Time: t, Data: map[string]any{
			"tool_call_id": id, "tool_name": st.Calls[id], "status": "MAESTRO_TOOL_CALL_STATUS_CANCELLED", "error_code": tool.CodeCancelled,
		}}
		if err := f.b.publish(ctx, ev, *st.Correlation); err != nil {
			return err
		}
		delete(st.Calls, id)
	}
	ev := Event{
		ID:   idBase + ".closed",
		Type: TypeSessionClosed, Time: t,
		Data: f.sessionData("closed", map[string]any{"close_reason": closeReason(reason)}),
	}
	if err := f.b.publish(ctx, ev, *st.Correlation); err != nil {
		return err
	}
	st.Closed, st.Open = st.Cursor, false
	lr.unsaved++ // saved with the cursor
	return nil
}

// recordTimeBefore returns the time of the log's record that ends at
// offset end (its newline at end-1).
func recordTimeBefore(file *os.File, end int64) (time.Time, error) {
	if file == nil || end <= 0 {
		return time.Time{}, errors.New("no record")
	}
	buf := make([]byte, 4096)
	start := int64(0)
	for pos := end - 1; pos > 0; {
		n := min(int64(len(buf)), pos)
		if _, err := file.ReadAt(buf[:n], pos-n); err != nil {
			return time.Time{}, err
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			start = pos - n + int64(i) + 1
			break
		}
		pos -= n
	}
	// The time is at the start of the record as internal/session writes
	// it (skimRecord); a record in another shape is decoded.
	head := buf[:min(int64(len(buf)), end-start)]
	if _, err := file.ReadAt(head, start); err != nil {
		return time.Time{}, err
	}
	if rest, ok := bytes.CutPrefix(head, skimCursor); ok {
		if i := bytes.Index(rest, skimTime); i > 0 {
			rest = rest[i+len(skimTime):]
			if j := bytes.IndexByte(rest, '"'); j > 0 {
				if t, err := time.Parse(time.RFC3339Nano, string(rest[:j])); err == nil {
					return t, nil
				}
			}
		}
	}
	line := make([]byte, end-start)
	if _, err := file.ReadAt(line, start); err != nil {
		return time.Time{}, err
	}
	var rec struct {
		Time time.Time `json:"time"`
	}
	if err := json.Unmarshal(line, &rec); err != nil {
		return time.Time{}, err
	}
	return rec.Time, nil
}

// ReasonSuspended, as the reason of Follower.Close, publishes
// maestro.sessions.session.suspended instead of closed: the session was
// drained to be restored (a hosted runner's drain); its next ready is
// published as resumed.
const ReasonSuspended = "suspended"

// EndReason is why a session ends, the close_reason of its closed event
// on the event bus (docs/events.md, "Platform events"), from the error
// type of its last prompt (protocol.State.LastErrorType, cleared by each
// prompt): "user_stopped" when the prompt was interrupted (Ctrl-C,
// SIGTERM, interrupt, or a shutdown or the end of input while
// it ran), "error" when it failed (fatal, or transient once the retries
// were spent), else "completed".
func EndReason(last protocol.ErrorType) string {
	switch last {
	case protocol.ErrorCancelled:
		return "user_stopped"
	case protocol.ErrorFatal, protocol.ErrorTransient:
		return "error"
	}
	return "completed"
}

// closeReason is close_reason's enum (wire contract §16).
func closeReason(r string) string {
	switch r {
	case "error":
		return "MAESTRO_CLOSE_REASON_ERROR"
	case "user_stopped":
		return "MAESTRO_CLOSE_REASON_USER_STOPPED"
	case "idle_timeout":
		return "MAESTRO_CLOSE_REASON_IDLE_TIMEOUT"
	}
	return "MAESTRO_CLOSE_REASON_COMPLETED"
}

// sessionEvents maps one record of a session log: the first ready is
// session.started, a later one (the session was resumed)
// session.resumed; tool and approval events as toolEvents says. Their
// ids are idAt(cursor).<i>.
func (f *Follower) sessionEvents(rec logRecord, st *sessionState) []Event {
	idBase := f.idAt(rec.Cursor)
	if st.NoReady && !st.Started {
		// A log without a ready (NoReady): the session starts with its
		// first record, whatever it is.
		st.Started, st.Open = true, true
		started := Event{ID: idBase + ".started", Type: TypeSessionStarted, Time: rec.Time, Data: f.sessionData("started", map[string]any{
			"model": f.meta.Model, "provider": f.meta.Provider, "executor_type": f.meta.ExecutorType,
		})}
		return append([]Event{started}, f.sessionEvents(rec, st)...)
	}
	if rec.Kind != session.KindEvent {
		return nil
	}
	fr := rec.Event
	if fr.Type == protocol.TypeReady {
		typ, state := TypeSessionStarted, "started"
		if st.Started {
			typ, state = TypeSessionResumed, "resumed"
		}
		st.Started, st.Open = true, true
		return []Event{{ID: idBase + ".0", Type: typ, Time: rec.Time, Data: f.sessionData(state, map[string]any{
			"model": fr.Model, "provider": fr.Provider, "executor_type": fr.ExecutorType,
		})}}
	}
	return toolEvents(fr, idBase, rec.Time, st.Calls)
}

// sessionData is the body of a session lifecycle event. A piece run's
// subtask's names the session whose run spawned it (parent_session_id,
// the parent's session_id: its log's directory), so a consumer tells
// from one event where a subtask comes from, whichever process
// publishes it.
func (f *Follower) sessionData(state string, more map[string]any) map[string]any {
	data := map[string]any{"session_id": f.id, "state": state}
	if f.meta.Agent != "" {
		data["agent"] = f.meta.Agent
	}
	if parent := parentDir(f.dir); parent != "" {
		data["parent_session_id"] = filepath.Base(parent)
	}
	for k, v := range more {
		data[k] = v
	}
	return data
}

// CatchUp publishes what earlier processes left unpublished in the
// session logs under storeDir: every session with a publish cursor (it
// was followed before) or a close mark that no process has open now
// (an open session is its process's to publish) and that this process
// does not follow, and the closed event of a session left open on the
// bus by a process that died (publishEnded); a piece session's subtask
// logs first (catchUpSubtasks). It returns when they are published or
// ctx ends.
func (b *Bus) CatchUp(ctx context.Context, storeDir string) error {
	return b.catchUpStore(ctx, storeDir, true)
}

// catchUpStore catches up on the sessions of the store in storeDir, as
// CatchUp; with subtasks, on their subtask logs too.
func (b *Bus) catchUpStore(ctx context.Context, storeDir string, subtasks bool) error {
	metas, err := session.NewStore(storeDir).List()
	if err != nil {
		return fmt.Errorf("list sessions to catch up: %w", err)
	}
	// A session that cannot be published (a corrupt record) is reported
	// and skipped: the others are still caught up.
	var errs []error
	for _, meta := range metas {
		dir := filepath.Join(storeDir, meta.ID)
		if !pending(dir) || inUse(dir) || !b.claim(dir) {
			continue
		}
		if subtasks {
			// The subtasks' closed events come before their parent's, as
			// when the run ends.
			if err := b.catchUpSubtasks(ctx, dir); err != nil {
				errs = append(errs, err)
			}
		}
		if ctx.Err() == nil {
			f := &Follower{b: b, dir: dir, meta: meta, id: meta.ID, closeC: make(chan struct{}), done: make(chan struct{})}
			if err := f.run(ctx, false); err != nil {
				errs = append(errs, fmt.Errorf("catch up session %s: %w", meta.ID, err))
			}
		}
		b.release(dir)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return errors.Join(errs...)
}

// catchUpSubtasks catches up (CatchUp) on the session logs of the
// subtasks of the piece runs of the session in dir, which live in its
// run directories (internal/engine's layout:
// <dir>/runs/<n>/subtasks/<NN-name>/logs/<session id>/; a subtask spawns
// none): a process that died mid-run left them open on the bus, and no
// session store lists them. It is called for a session that is pending
// (CatchUp) or followed (a resume), so a killed piece run's subtasks are
// closed by the process that closes or resumes their parent.
func (b *Bus) catchUpSubtasks(ctx context.Context, dir string) error {
	runs, err := os.ReadDir(filepath.Join(dir, "runs"))
	if err != nil {
		return nil // a plain session (or none readable): no subtask
	}
	// The mark a subtask left (markParent) is taken first, so that one
	// written during this pass stays; a pass that did not publish every
	// subtask leaves one for the next.
	mark := filepath.Join(dir, subtasksFile)
	_ = os.Remove(mark)
	var errs []error
	defer func() {
		if len(errs) > 0 || ctx.Err() != nil {
			_ = os.WriteFile(mark, nil, 0o600)
		}
	}()
	for _, run := range runs {
		subs, err := os.ReadDir(filepath.Join(dir, "runs", run.Name(), "subtasks"))
		if err != nil || !run.IsDir() {
			continue
		}
		for _, sub := range subs {
			if !sub.IsDir() {
				continue // its result file (NN-name.md)
			}
			logs := filepath.Join(dir, "runs", run.Name(), "subtasks", sub.Name(), "logs")
			if err := b.catchUpStore(ctx, logs, false); err != nil {
				if ctx.Err() != nil {
					errs = append(errs, err)
					return ctx.Err()
				}
				errs = append(errs, fmt.Errorf("subtask logs of %s: %w", filepath.Base(dir), err))
			}
		}
	}
	return errors.Join(errs...)
}

// pending reports whether a session directory may hold unpublished
// records or a closed event: it has a close mark, a publish cursor
// behind its log, or it is open on the bus (its process may have died),
// or a subtask of its runs left events to publish (markParent).
func pending(dir string) bool {
	if _, err := os.Stat(filepath.Join(dir, closeFile)); err == nil {
		return true
	}
	if _, err := os.Stat(filepath.Join(dir, subtasksFile)); err == nil {
		return true // a subtask's events are left (markParent)
	}
	var st sessionState
	ok, err := readJSON(filepath.Join(dir, cursorFile), &st)
	if err != nil || !ok {
		return false
	}
	if st.Open {
		return true
	}
	fi, err := os.Stat(filepath.Join(dir, logFile))
	return err == nil && fi.Size() > st.Offset
}

// inUse reports whether a process has the session's log open for
// writing (it holds the log's lock, internal/session).
func inUse(dir string) bool {
	file, err := os.Open(filepath.Join(dir, logFile))
	if err != nil {
		return false
	}
	defer file.Close()
	if err := syscall.Flock(int(file.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		return true
	}
	_ = syscall.Flock(int(file.Fd()), syscall.LOCK_UN)
	return false
}
