// Package session keeps Maestro's sessions: every run is a session with an
// id, a metadata file and one append-only, cursor-numbered JSON-lines log.
// The log holds two kinds of record: protocol events (what clients saw) and
// conversation messages (what the model saw), so that replay, resume and
// reconnection all come from the same file.
//
// Layout under the store directory (default ~/.maestro/sessions):
//
//	<id>/session.json   metadata (Meta)
//	<id>/events.jsonl   the log, one Record per line, cursors 1, 2, 3, …
package session

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"

	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/workspace"
)

// Meta describes a session.
type Meta struct {
	ID        string    `json:"id"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// Workspace is the absolute workspace directory.
	Workspace string `json:"workspace"`
	Provider  string `json:"provider"`
	Model     string `json:"model"`
	// ExecutorType is "live" or "replay".
	ExecutorType protocol.ExecutorType `json:"executor_type"`
	// Replay is the scenario a replay session runs ("builtin:demo" for the
	// bundled demo), so a resumed session replays the same script.
	Replay string `json:"replay,omitempty"`
	// Title is the first prompt, shortened.
	Title string `json:"title,omitempty"`
	// Agent is the agent CLI a headless --agent session runs its prompts
	// on (its definition id, e.g. "claude-code"); empty for Maestro's own
	// loop. Provider then repeats it and Model is the CLI's model.
	Agent string `json:"agent,omitempty"`
	// AgentSession is the agent CLI's own session id, resumed at the next
	// prompt (also after a restart: maestro headless --resume ID).
	AgentSession string `json:"agent_session,omitempty"`
	// ClientSessionID is the session id clients see (ready, session_info,
	// snapshots) when the launcher chose one (maestro headless under
	// MAESTRO_SESSION_ID); the log keeps ID. AgentRunID is the launcher's
	// agent run id (MAESTRO_AGENT_RUN_ID).
	ClientSessionID string `json:"client_session_id,omitempty"`
	AgentRunID      string `json:"agent_run_id,omitempty"`
}

// Record kinds. A compaction is a message record whose message carries
// llm.Message.Compaction: the history read back applies it
// (llm.AppendHistory), so a resumed session continues from the summary
// and the turns kept after it.
const (
	KindEvent   = "event"
	KindMessage = "message"
)

// Record is one line of the log.
type Record struct {
	Cursor int64     `json:"cursor"`
	Time   time.Time `json:"time"`
	Kind   string    `json:"kind"`
	// Event is the protocol message (with its "type"), for KindEvent.
	Event json.RawMessage `json:"event,omitempty"`
	// Message is the conversation message, for KindMessage.
	Message *llm.Message `json:"message,omitempty"`
}

// EventType returns the protocol type of an event record, "" otherwise.
func (r Record) EventType() string {
	if r.Kind != KindEvent {
		return ""
	}
	var head struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(r.Event, &head)
	return head.Type
}

// Store is a directory of sessions.
type Store struct {
	dir string
	// root, when set, is dir opened: sessions are created through it (see
	// NewStoreIn).
	root *workspace.Dir
	now  func() time.Time
}

// NewStore returns a store rooted at dir (created on first use).
func NewStore(dir string) *Store {
	return &Store{dir: dir, now: time.Now}
}

// NewStoreIn returns a store whose directory is the open directory root
// (path names it in messages and in LogPath). Create and Import make each
// session's directory below root without following a symbolic link, and a
// session then reaches its files only through its own open directory: a
// link planted later in place of a session directory, or of the store's,
// is never followed. Open, List and Records are not supported on such a
// store. The caller keeps root open while the store's sessions are.
func NewStoreIn(root *workspace.Dir, path string) *Store {
	return &Store{dir: path, root: root, now: time.Now}
}

// ErrNotFound is returned for an unknown session id.
var ErrNotFound = errors.New("session not found")

// ErrBusy is returned when another process has the session open.
var ErrBusy = errors.New("session is in use by another process")

var idPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// Create starts a new session with a fresh time-ordered id.
func (s *Store) Create(meta Meta) (*Session, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return nil, fmt.Errorf("create session id: %w", err)
	}
	meta.ID = id.String()
	now := s.now().UTC()
	meta.CreatedAt, meta.UpdatedAt = now, now
	dir := filepath.Join(s.dir, meta.ID)
	if s.root != nil {
		return s.createIn(dir, meta)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create session directory: %w", err)
	}
	if err := writeMeta(dir, meta); err != nil {
		return nil, err
	}
	return s.open(dir, meta)
}

// createIn creates the session's directory and files below s.root.
func (s *Store) createIn(dir string, meta Meta) (*Session, error) {
	d, err := s.root.MkdirPath(meta.ID, 0o700)
	if err != nil {
		return nil, fmt.Errorf("create session directory: %w", err)
	}
	sess := &Session{meta: meta, dir: dir, d: d, now: s.now}
	if err := sess.writeMeta(); err != nil {
		d.Close()
		return nil, err
	}
	f, err := d.Create("events.jsonl", 0o600)
	if err != nil {
		d.Close()
		return nil, fmt.Errorf("create session log: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		d.Close()
		return nil, fmt.Errorf("%w: %s", ErrBusy, meta.ID)
	}
	sess.f = f
	return sess, nil
}

// Import creates a new session (as Create) whose log starts with the
// records read from r, a session log written by another process (a
// hosted runner's drain): each line must be a record, cursors increasing;
// the conversation messages among them become the session's history.
// Reading stops with an error after max bytes.
func (s *Store) Import(meta Meta, r io.Reader, max int64) (*Session, error) {
	sess, err := s.Create(meta)
	if err != nil {
		return nil, err
	}
	lr := &io.LimitedReader{R: r, N: max + 1}
	for rec, err := range readRecords(lr) {
		if err == nil && rec.Cursor <= sess.cursor {
			err = fmt.Errorf("record cursor %d after %d: cursors must increase", rec.Cursor, sess.cursor)
		}
		if err == nil {
			err = sess.put(rec)
		}
		if err != nil {
			s.discard(sess)
			return nil, fmt.Errorf("import session log: %w", err)
		}
	}
	if lr.N <= 0 {
		s.discard(sess)
		return nil, fmt.Errorf("import session log: larger than %d bytes", max)
	}
	sess.mu.Lock()
	sess.history = closeToolCalls(sess.history)
	sess.mu.Unlock()
	return sess, nil
}

// discard closes and removes a session that failed to import.
func (s *Store) discard(sess *Session) {
	sess.Close()
	if s.root != nil {
		s.root.RemoveAll(sess.ID())
	} else {
		os.RemoveAll(sess.dir)
	}
}

// put appends rec as it is (cursor and time kept).
func (s *Session) put(rec Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if _, err := s.f.Write(append(data, '\n')); err != nil {
		return err
	}
	s.cursor = rec.Cursor
	if rec.Kind == KindMessage && rec.Message != nil {
		s.history = llm.AppendHistory(s.history, *rec.Message)
	}
	return nil
}

// Open opens an existing session for appending (resume). The whole id or
// a unique prefix of at least 8 characters is accepted.
func (s *Store) Open(id string) (*Session, error) {
	full, err := s.resolve(id)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(s.dir, full)
	meta, err := readMeta(dir)
	if err != nil {
		return nil, err
	}
	return s.open(dir, meta)
}

// List returns the metadata of every session, newest first.
func (s *Store) List() ([]Meta, error) {
	entries, err := os.ReadDir(s.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	var metas []Meta
	for _, e := range entries {
		if !e.IsDir() || !idPattern.MatchString(e.Name()) {
			continue
		}
		m, err := readMeta(filepath.Join(s.dir, e.Name()))
		if err != nil {
			continue
		}
		metas = append(metas, m)
	}
	slices.SortFunc(metas, func(a, b Meta) int { return b.CreatedAt.Compare(a.CreatedAt) })
	return metas, nil
}

// Records reads a session's log from cursor after (exclusive), without
// opening it for writing.
func (s *Store) Records(id string, after int64) iter.Seq2[Record, error] {
	return func(yield func(Record, error) bool) {
		full, err := s.resolve(id)
		if err != nil {
			yield(Record{}, err)
			return
		}
		f, err := os.Open(filepath.Join(s.dir, full, "events.jsonl"))
		if err != nil {
			yield(Record{}, fmt.Errorf("open session log: %w", err))
			return
		}
		defer f.Close()
		for rec, err := range readRecords(f) {
			if err != nil {
				yield(Record{}, err)
				return
			}
			if rec.Cursor > after && !yield(rec, nil) {
				return
			}
		}
	}
}

func (s *Store) resolve(id string) (string, error) {
	if idPattern.MatchString(id) {
		if _, err := os.Stat(filepath.Join(s.dir, id, "session.json")); err != nil {
			return "", fmt.Errorf("%w: %s", ErrNotFound, id)
		}
		return id, nil
	}
	var match []string
	if len(id) >= MinPrefix {
		entries, _ := os.ReadDir(s.dir)
		for _, e := range entries {
			if idPattern.MatchString(e.Name()) && len(e.Name()) >= len(id) && e.Name()[:len(id)] == id {
				match = append(match, e.Name())
			}
		}
	}
	switch len(match) {
	case 0:
	case 1:
		return match[0], nil
	default:
		return "", s.ambiguous(id, match)
	}
	// The id a launcher chose (Meta.ClientSessionID): its newest session.
	if metas, err := s.List(); err == nil {
		for _, m := range metas {
			if m.ClientSessionID == id {
				return m.ID, nil
			}
		}
	}
	if len(id) < MinPrefix {
		return "", fmt.Errorf("%w: %q (give the full id, at least 8 characters of it, or the launcher's session id)", ErrNotFound, id)
	}
	return "", fmt.Errorf("%w: %s", ErrNotFound, id)
}

// ambiguous is the error for a prefix several sessions share.
func (s *Store) ambiguous(id string, match []string) error {
	amb := &AmbiguousError{Prefix: id}
	for _, m := range match {
		meta, err := readMeta(filepath.Join(s.dir, m))
		if err != nil {
			meta = Meta{ID: m}
		}
		amb.Matches = append(amb.Matches, meta)
	}
	slices.SortFunc(amb.Matches, func(a, b Meta) int { return b.CreatedAt.Compare(a.CreatedAt) })
	return amb
}

// AmbiguousError is a session id prefix that several sessions share: its
// message lists them (id, start time, first prompt), newest first, so the
// user can pick one.
type AmbiguousError struct {
	Prefix  string
	Matches []Meta
}

func (e *AmbiguousError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "session id prefix %q is ambiguous: %d sessions match; give more of the id:", e.Prefix, len(e.Matches))
	for _, m := range e.Matches {
		title := m.Title
		if title == "" {
			title = "(no prompt yet)"
		}
		line, _, _ := strings.Cut(title, "\n")
		started := "-"
		if !m.CreatedAt.IsZero() {
			started = m.CreatedAt.Local().Format("2006-01-02 15:04:05")
		}
		fmt.Fprintf(&b, "\n  %s  %s  %s", m.ID, started, line)
	}
	return b.String()
}

// Meta reads the metadata of the session id names (the whole id or a
// unique prefix of at least 8 characters) without opening its log.
func (s *Store) Meta(id string) (Meta, error) {
	full, err := s.resolve(id)
	if err != nil {
		return Meta{}, err
	}
	return readMeta(filepath.Join(s.dir, full))
}

// Dir is the store's directory: session id's files are in Dir()/<id>.
func (s *Store) Dir() string { return s.dir }

// MinPrefix is the shortest session id prefix Open accepts.
const MinPrefix = 8

// ShortID returns the shortest prefix of the session id that names it
// alone among the store's sessions, now and later (see
// ShortestUniquePrefix). Ids start with their creation time, so sessions
// of the same minute share their first 8 characters: hints print this
// instead of a fixed length.
func (s *Store) ShortID(id string) string {
	entries, _ := os.ReadDir(s.dir)
	ids := make([]string, 0, len(entries))
	for _, e := range entries {
		if idPattern.MatchString(e.Name()) {
			ids = append(ids, e.Name())
		}
	}
	return ShortestUniquePrefix(id, ids, s.now())
}

// ShortestUniquePrefix returns the shortest prefix of id, at least
// MinPrefix characters and not ending at a dash, that no other id of ids
// starts with and that no session created from now on can start with:
// an id's first 12 hex digits are its creation time in milliseconds
// (UUIDv7), so a prefix of them covers a window of time, and the prefix
// is long enough for its window to have ended by now. A prefix printed in
// a hint thus keeps working when more sessions start in the same minute.
// It returns id itself when no prefix is shorter.
func ShortestUniquePrefix(id string, ids []string, now time.Time) string {
	for n := MinPrefix; n < len(id); n++ {
		p := id[:n]
		if p[n-1] == '-' || !windowEnded(p, now) {
			continue
		}
		unique := true
		for _, other := range ids {
			if other != id && strings.HasPrefix(other, p) {
				unique = false
				break
			}
		}
		if unique {
			return p
		}
	}
	return id
}

// windowEnded reports whether every id starting with prefix was created
// before now, reading the prefix's time digits (the 12 hex digits before
// the second dash); a prefix that holds them all, or that is no time,
// counts as ended.
func windowEnded(prefix string, now time.Time) bool {
	digits := strings.Replace(prefix, "-", "", 1)
	if len(digits) >= 12 {
		return true
	}
	v, err := strconv.ParseUint(digits, 16, 64)
	if err != nil {
		return true
	}
	shift := 4 * uint(12-len(digits))
	end := (v + 1) << shift // the first millisecond after the window
	return end <= uint64(now.UnixMilli())
}

func (s *Store) open(dir string, meta Meta) (*Session, error) {
	path := filepath.Join(dir, "events.jsonl")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open session log: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("%w: %s", ErrBusy, meta.ID)
	}
	sess := &Session{meta: meta, dir: dir, f: f, now: s.now}
	// Load the history and the last cursor; drop a torn last line left by
	// a crash mid-write so appends continue cleanly.
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, fmt.Errorf("read session log: %w", err)
	}
	var good int64
	br := bufio.NewReaderSize(f, 1<<16)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 && line[len(line)-1] == '\n' {
			var rec Record
			if jerr := json.Unmarshal(line, &rec); jerr != nil {
				f.Close()
				return nil, fmt.Errorf("session log %s: corrupt record after cursor %d: %w", path, sess.cursor, jerr)
			}
			sess.cursor = rec.Cursor
			if rec.Kind == KindMessage && rec.Message != nil {
				sess.history = llm.AppendHistory(sess.history, *rec.Message)
			}
			good += int64(len(line))
			continue
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("read session log: %w", err)
		}
	}
	if err := f.Truncate(good); err != nil {
		f.Close()
		return nil, fmt.Errorf("repair session log: %w", err)
	}
	sess.history = closeToolCalls(sess.history)
	return sess, nil
}

func writeMeta(dir string, meta Meta) error {
	data, err := json.MarshalIndent(meta, "", "  ")
	if err != nil {
		return fmt.Errorf("encode session metadata: %w", err)
	}
	tmp := filepath.Join(dir, ".session.json.tmp")
	if err := os.WriteFile(tmp, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("write session metadata: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "session.json")); err != nil {
		return fmt.Errorf("write session metadata: %w", err)
	}
	return nil
}

func readMeta(dir string) (Meta, error) {
	var meta Meta
	data, err := os.ReadFile(filepath.Join(dir, "session.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return meta, fmt.Errorf("%w: %s", ErrNotFound, filepath.Base(dir))
	}
	if err != nil {
		return meta, fmt.Errorf("read session metadata: %w", err)
	}
	if err := json.Unmarshal(data, &meta); err != nil {
		return meta, fmt.Errorf("session metadata %s: %w", filepath.Join(dir, "session.json"), err)
	}
	return meta, nil
}

func readRecords(r io.Reader) iter.Seq2[Record, error] {
	return func(yield func(Record, error) bool) {
		br := bufio.NewReaderSize(r, 1<<16)
		for {
			line, err := br.ReadBytes('\n')
			if len(line) > 0 && line[len(line)-1] == '\n' {
				var rec Record
				if jerr := json.Unmarshal(bytes.TrimSpace(line), &rec); jerr != nil {
					yield(Record{}, fmt.Errorf("corrupt session record: %w", jerr))
					return
				}
				if !yield(rec, nil) {
					return
				}
				continue
			}
			if err != nil {
				if err != io.EOF {
					yield(Record{}, err)
				}
				return // a torn last line is not a record yet
			}
		}
	}
}

// Session is an open session. It implements agent.Sink: events and
// messages are appended to the log as they happen, one write per record,
// so a crash loses at most the record being written.
type Session struct {
	meta Meta
	dir  string
	// d, when set, is dir opened (a session of NewStoreIn): the metadata
	// and the log are reached through it, never through dir.
	d   *workspace.Dir
	now func() time.Time

	mu      sync.Mutex
	f       *os.File
	cursor  int64
	history []llm.Message
	err     error
	buf     []byte
}

// Meta returns the session's metadata.
func (s *Session) Meta() Meta { return s.meta }

// ID returns the session id.
func (s *Session) ID() string { return s.meta.ID }

// Dir returns the session's directory.
func (s *Session) Dir() string { return s.dir }

// ShortID returns the shortest prefix of the session's id that names it
// alone in its store now (see Store.ShortID): what resume hints print.
func (s *Session) ShortID() string {
	store := NewStore(filepath.Dir(s.dir))
	store.now = s.now
	return store.ShortID(s.meta.ID)
}

// LogPath returns the path of the session's log.
func (s *Session) LogPath() string { return filepath.Join(s.dir, "events.jsonl") }

// History returns the conversation so far.
func (s *Session) History() []llm.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.history)
}

// Cursor returns the cursor of the last record.
func (s *Session) Cursor() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cursor
}

// Event appends a protocol event.
func (s *Session) Event(m protocol.Message) {
	data, err := protocol.Marshal(m)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.fail(err)
		return
	}
	s.append(Record{Kind: KindEvent, Event: data})
}

// Message appends a conversation message.
func (s *Session) Message(m llm.Message) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.history = llm.AppendHistory(s.history, m)
	s.append(Record{Kind: KindMessage, Message: &m})
}

// append writes one record; the caller holds mu.
func (s *Session) append(rec Record) {
	if s.err != nil {
		return
	}
	rec.Cursor = s.cursor + 1
	rec.Time = s.now().UTC()
	data, err := json.Marshal(rec)
	if err != nil {
		s.fail(err)
		return
	}
	s.buf = append(append(s.buf[:0], data...), '\n')
	if _, err := s.f.Write(s.buf); err != nil {
		s.fail(err)
		return
	}
	s.cursor = rec.Cursor
}

func (s *Session) fail(err error) {
	if s.err == nil {
		s.err = fmt.Errorf("session %s: write log: %w", s.meta.ID, err)
	}
}

// Err returns the first write failure, if any. Events after a failure are
// dropped; callers check Err at the end of a run.
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// SetTitle records the session's title if it has none.
func (s *Session) SetTitle(title string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.meta.Title != "" {
		return nil
	}
	if r := []rune(title); len(r) > 80 {
		title = string(r[:79]) + "…"
	}
	s.meta.Title = title
	return s.writeMeta()
}

// SetAgentSession records the agent CLI's session id in the metadata at
// once, so that a process that dies before Close still leaves it.
func (s *Session) SetAgentSession(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.meta.AgentSession == id {
		return nil
	}
	s.meta.AgentSession = id
	return s.writeMeta()
}

// SetLaunch records the launcher's ids (Meta.ClientSessionID,
// Meta.AgentRunID); an empty argument leaves its field as it is.
func (s *Session) SetLaunch(clientSessionID, agentRunID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, a := cmp.Or(clientSessionID, s.meta.ClientSessionID), cmp.Or(agentRunID, s.meta.AgentRunID)
	if c == s.meta.ClientSessionID && a == s.meta.AgentRunID {
		return nil
	}
	s.meta.ClientSessionID, s.meta.AgentRunID = c, a
	return s.writeMeta()
}

// Close syncs the log to disk, updates the metadata and releases the
// session.
func (s *Session) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return s.err
	}
	err := s.f.Sync()
	s.meta.UpdatedAt = s.now().UTC()
	// Unlock before closing: a process forked elsewhere in this program
	// holds a copy of the descriptor until its exec, and the lock belongs
	// to the open file description, so closing alone could leave the
	// session "in use" for that moment.
	_ = syscall.Flock(int(s.f.Fd()), syscall.LOCK_UN)
	err = errors.Join(s.err, err, s.writeMeta(), s.f.Close())
	s.f = nil
	if s.d != nil {
		s.d.Close()
	}
	return err
}

// writeMeta writes the metadata file; the caller holds mu (or has the
// session to itself).
func (s *Session) writeMeta() error {
	if s.d == nil {
		return writeMeta(s.dir, s.meta)
	}
	data, err := json.MarshalIndent(s.meta, "", "  ")
	if err != nil {
		return fmt.Errorf("encode session metadata: %w", err)
	}
	if err := s.d.WriteFileAtomic("session.json", append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("write session metadata: %w", err)
	}
	return nil
}

// Sync flushes the log to disk and reports the first write failure.
func (s *Session) Sync() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return s.err
	}
	return errors.Join(s.err, s.f.Sync())
}

// ExportTo copies the log as it is now to w. A session of NewStoreIn
// reads it through its open directory (a regular file, no link followed).
func (s *Session) ExportTo(w io.Writer) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var (
		f   *os.File
		err error
	)
	if s.d != nil {
		f, err = s.d.Open("events.jsonl")
	} else {
		f, err = os.Open(s.LogPath())
	}
	if err != nil {
		return fmt.Errorf("export session log: %w", err)
	}
	defer f.Close()
	if _, err := io.Copy(w, f); err != nil {
		return fmt.Errorf("export session log: %w", err)
	}
	return nil
}
