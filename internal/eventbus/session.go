package eventbus

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/session"
)

// The files a follower keeps in a session's directory, beside its log.
const (
	// cursorFile is the publish cursor (sessionState).
	cursorFile = "eventbus.json"
	// closeFile asks for the session's closed event (closeMark): written
	// when the session closes, removed once the event is published.
	closeFile = "eventbus-close.json"
	logFile   = "events.jsonl"
	// saveEvery is how many records a follower publishes between two
	// saves of its cursor; a crash re-sends at most these, which
	// JetStream drops as duplicates.
	saveEvery = 1024
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
	// Correlation is the session's, from the environment of the process
	// that first followed it, so a later process publishes its backlog
	// with the same ids.
	Correlation *Correlation `json:"correlation,omitempty"`
}

// closeMark asks for the closed event of a session closed at Cursor.
type closeMark struct {
	Cursor int64  `json:"cursor"`
	Reason string `json:"reason"`
}

// Follower publishes one session's log as it grows.
type Follower struct {
	b      *Bus
	dir    string
	meta   session.Meta
	closeC chan struct{}
	done   chan struct{}
}

// FollowSession starts publishing the log of the session in dir (its
// directory in the session store) from its persisted cursor. Call Close
// when the session closes.
func (b *Bus) FollowSession(dir string, meta session.Meta) *Follower {
	f := &Follower{b: b, dir: dir, meta: meta, closeC: make(chan struct{}), done: make(chan struct{})}
	if !b.claim(dir) {
		close(f.done) // followed already by this process
		return f
	}
	b.spawn(func() {
		defer close(f.done)
		defer b.release(dir)
		if err := f.run(b.ctx, true); err != nil && !errors.Is(err, context.Canceled) {
			b.log.Warn("event bus: follow session log", "session", meta.ID, "err", err)
		}
	})
	return f
}

// Close records that the session closed after its record cursor (the
// log is complete), so its closed event follows its last record, and
// waits up to Options.CloseWait for them to be published. Events not
// published by then stay in the log for Bus.CatchUp.
func (f *Follower) Close(cursor int64, reason string) {
	if err := writeJSON(filepath.Join(f.dir, closeFile), closeMark{Cursor: cursor, Reason: reason}); err != nil {
		f.b.log.Warn("event bus: record the session's close", "session", f.meta.ID, "err", err)
	}
	select {
	case <-f.closeC:
	default:
		close(f.closeC)
	}
	t := time.NewTimer(f.b.o.CloseWait)
	defer t.Stop()
	select {
	case <-f.done:
	case <-t.C:
		f.b.log.Warn("event bus: session closed before its events were published; the next Maestro process publishes them", "session", f.meta.ID)
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
	if st.Correlation == nil {
		env := f.b.o.Env
		env.SessionID = cmp.Or(f.meta.ClientSessionID, env.SessionID, f.meta.ID)
		env.AgentRunID = cmp.Or(env.AgentRunID, f.meta.AgentRunID)
		st.Correlation = &env
		if err := writeJSON(stPath, st); err != nil {
			return err
		}
	}
	if st.Calls == nil {
		st.Calls = map[string]string{}
	}
	t := time.NewTicker(f.b.o.Poll)
	defer t.Stop()
	lr := &logReader{path: filepath.Join(f.dir, logFile), saved: time.Now()}
	defer lr.close()
	defer func() {
		if err := lr.save(stPath, &st); err != nil {
			f.b.log.Warn("event bus: save the publish cursor", "session", f.meta.ID, "err", err)
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
		if err != nil {
			return errors.Join(err, lr.save(stPath, &st))
		}
		if n > 0 {
			continue
		}
		// Caught up: the cursor is saved at most every saveIdle (and
		// every saveEvery records while the log grows, and when the
		// follower stops), not after every record.
		if closing || time.Since(lr.saved) >= saveIdle {
			if err := lr.save(stPath, &st); err != nil {
				return err
			}
		}
		if closing {
			return f.publishClose(ctx, &st, stPath, st.Cursor)
		}
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
	path    string
	file    *os.File
	br      *bufio.Reader
	unsaved int
	saved   time.Time
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
// written.
func (lr *logReader) save(stPath string, st *sessionState) error {
	if lr.unsaved == 0 {
		return nil
	}
	lr.unsaved, lr.saved = 0, time.Now()
	return writeJSON(stPath, st)
}

func (lr *logReader) close() {
	if lr.file != nil {
		lr.file.Close()
	}
}

// logRecord is what the follower reads of a session record: a
// conversation message is skipped, not decoded.
type logRecord struct {
	Cursor int64           `json:"cursor"`
	Time   time.Time       `json:"time"`
	Kind   string          `json:"kind"`
	Event  json.RawMessage `json:"event,omitempty"`
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
	for {
		line, err := lr.br.ReadBytes('\n')
		if len(line) == 0 || line[len(line)-1] != '\n' {
			break // the end, or a record being written
		}
		cursor, mapped, skimmed := skimRecord(line)
		var rec logRecord
		if !skimmed || mapped && cursor > st.Cursor {
			if jerr := json.Unmarshal(line, &rec); jerr != nil {
				return n, fmt.Errorf("session log %s: corrupt record after cursor %d: %w", f.dir, st.Cursor, jerr)
			}
		} else {
			rec.Cursor = cursor
		}
		if rec.Cursor > st.Cursor {
			if marked && mark.Cursor <= rec.Cursor-1 {
				if err := f.publishClose(ctx, st, stPath, rec.Cursor-1); err != nil {
					return n, err
				}
				marked = false
			}
			for _, ev := range f.sessionEvents(rec, st) {
				if err := f.b.publish(ctx, ev, *st.Correlation); err != nil {
					return n, err
				}
			}
			st.Cursor = rec.Cursor
		}
		st.Offset += int64(len(line))
		n++
		if lr.unsaved++; lr.unsaved >= saveEvery {
			if err := lr.save(stPath, st); err != nil {
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
// published), then removes the mark.
func (f *Follower) publishClose(ctx context.Context, st *sessionState, stPath string, upTo int64) error {
	markPath := filepath.Join(f.dir, closeFile)
	var m closeMark
	ok, err := readJSON(markPath, &m)
	if err != nil || !ok || m.Cursor > upTo {
		return err
	}
	if st.Closed < m.Cursor {
		ev := Event{
			ID:   f.meta.ID + "." + strconv.FormatInt(m.Cursor, 10) + ".closed",
			Type: TypeSessionClosed, Time: time.Now().UTC(),
			Data: f.sessionData("closed", map[string]any{"close_reason": closeReason(m.Reason)}),
		}
		if err := f.b.publish(ctx, ev, *st.Correlation); err != nil {
			return err
		}
		st.Closed = m.Cursor
		if err := writeJSON(stPath, st); err != nil {
			return err
		}
	}
	if err := os.Remove(markPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", markPath, err)
	}
	return nil
}

// closeReason is close_reason's enum (wire contract §16).
func closeReason(r string) string {
	switch r {
	case "error":
		return "MAESTRO_CLOSE_REASON_ERROR"
	case "user_stopped":
		return "MAESTRO_CLOSE_REASON_USER_STOPPED"
	}
	return "MAESTRO_CLOSE_REASON_COMPLETED"
}

// sessionEvents maps one record of a session log: the first ready is
// session.started, a later one (the session was resumed)
// session.resumed; tool and approval events as toolEvents says. Their
// ids are <session id>.<cursor>.<i>.
func (f *Follower) sessionEvents(rec logRecord, st *sessionState) []Event {
	if rec.Kind != session.KindEvent {
		return nil
	}
	fr := decodeFrame(rec.Event)
	idBase := f.meta.ID + "." + strconv.FormatInt(rec.Cursor, 10)
	if fr.Type == protocol.TypeReady {
		typ, state := TypeSessionStarted, "started"
		if st.Started {
			typ, state = TypeSessionResumed, "resumed"
		}
		st.Started = true
		return []Event{{ID: idBase + ".0", Type: typ, Time: rec.Time, Data: f.sessionData(state, map[string]any{
			"model": fr.Model, "provider": fr.Provider, "executor_type": fr.ExecutorType,
		})}}
	}
	return toolEvents(fr, idBase, rec.Time, st.Calls)
}

// sessionData is the body of a session lifecycle event.
func (f *Follower) sessionData(state string, more map[string]any) map[string]any {
	data := map[string]any{"session_id": f.meta.ID, "state": state}
	if f.meta.Agent != "" {
		data["agent"] = f.meta.Agent
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
// does not follow. It returns when they are published or ctx ends.
func (b *Bus) CatchUp(ctx context.Context, storeDir string) error {
	metas, err := session.NewStore(storeDir).List()
	if err != nil {
		return fmt.Errorf("list sessions to catch up: %w", err)
	}
	for _, meta := range metas {
		dir := filepath.Join(storeDir, meta.ID)
		if !pending(dir) || inUse(dir) || !b.claim(dir) {
			continue
		}
		f := &Follower{b: b, dir: dir, meta: meta, closeC: make(chan struct{}), done: make(chan struct{})}
		err := f.run(ctx, false)
		b.release(dir)
		if err != nil {
			return fmt.Errorf("catch up session %s: %w", meta.ID, err)
		}
	}
	return nil
}

// pending reports whether a session directory may hold unpublished
// records: it has a close mark, or a publish cursor behind its log.
func pending(dir string) bool {
	if _, err := os.Stat(filepath.Join(dir, closeFile)); err == nil {
		return true
	}
	var st sessionState
	ok, err := readJSON(filepath.Join(dir, cursorFile), &st)
	if err != nil || !ok {
		return false
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
