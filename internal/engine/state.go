package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"syscall"
	"time"

	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/workspace"
)

// RunStatus is the state of a run, named as the job statuses of
// docs/spec/pieces-engine.md §9.2.
type RunStatus string

// Run statuses.
const (
	// StatusRunning: a movement is running, or the run was interrupted
	// while one was (Resume restarts that movement).
	StatusRunning RunStatus = "running"
	// StatusWaitingSubtasks: the run waits for its subtasks.
	StatusWaitingSubtasks RunStatus = "waiting_subtasks"
	// StatusWaitingHuman: the run waits for the user's answer (ASK).
	StatusWaitingHuman RunStatus = "waiting_human"
	// StatusSucceeded: complete(success).
	StatusSucceeded RunStatus = "succeeded"
	// StatusAborted: complete(aborted), or Maestro aborted the run (loop
	// control, max_movements, no exit).
	StatusAborted RunStatus = "aborted"
	// StatusFailed: an error stopped the run (model failure, a movement
	// that cannot run). Resume retries the movement.
	StatusFailed RunStatus = "failed"
	// StatusCancelled: a subtask cancelled because its parent run ended.
	StatusCancelled RunStatus = "cancelled"
)

// Final reports whether the run has ended for good: succeeded, aborted or
// cancelled. Failed runs can be resumed.
func (s RunStatus) Final() bool {
	return s == StatusSucceeded || s == StatusAborted || s == StatusCancelled
}

// StateVersion is the version of the state file this package writes.
const StateVersion = 1

// StateFile is where a run's state lives, relative to its run directory.
const StateFile = "logs/run-state.json"

// lockFile serialises processes working on one run.
const lockFile = "logs/run.lock"

// State is a run's persisted state: everything needed to continue it in
// another process. It is written atomically to <run dir>/logs/run-state.json
// at every step, never through a symbolic link below the run directory.
type State struct {
	Version int    `json:"version"`
	RunID   string `json:"run_id"`
	// Piece is the piece's name; PieceYAML its canonical YAML as it was
	// when the run started, so a resumed run follows the same definition
	// even if the catalog changed.
	Piece     string `json:"piece"`
	PieceYAML string `json:"piece_yaml"`
	Task      string `json:"task"`
	// Depth is 0 for a run, 1 for a subtask's run.
	Depth int `json:"depth,omitempty"`

	Status RunStatus `json:"status"`
	// Movement is the current (or last) movement; Entry how it is entered
	// next time the run loop runs it.
	Movement string `json:"movement"`
	Entry    Entry  `json:"entry"`
	// Movements counts movements executed (entries, including resumes
	// after WAIT_SUBTASKS), capped by max_movements.
	Movements int `json:"movements"`
	// History lists the movements entered by transitions, in order; an
	// empty string marks progress that resets loop counting (an answer).
	History []string `json:"history"`
	// Revisits is how many times in a row the run came back to the
	// current movement; LoopNote the warning its model is given.
	Revisits int    `json:"revisits,omitempty"`
	LoopNote string `json:"loop_note,omitempty"`
	// OmittedNoted lists the movements whose omitted tools the run has
	// reported (tools_omitted): a run says it once per movement, not at
	// every entry.
	OmittedNoted []string `json:"omitted_noted,omitempty"`
	// Lessons are the run's accumulated lessons, oldest first.
	Lessons []string `json:"lessons"`
	// Handoff is the previous movement's summary for the current one.
	Handoff *Handoff `json:"handoff,omitempty"`
	// Feedback is the latest summary of a backward transition (a movement
	// sending work back), kept until a movement with edit: true runs.
	Feedback *Handoff `json:"feedback,omitempty"`
	// Question is the pending question (waiting_human); Answers the
	// questions answered so far.
	Question string   `json:"question,omitempty"`
	Answers  []Answer `json:"answers,omitempty"`
	// Conversation is the current movement's conversation when it paused
	// for the user, so it continues where it stopped.
	Conversation []llm.Message `json:"conversation,omitempty"`
	// Progress is the current movement's conversation so far, up to its
	// last round of tool results (Config.KeepProgress): an interrupted
	// run continues it when resumed.
	Progress []llm.Message `json:"progress,omitempty"`
	// ModelTurns counts the run's model turns (assistant messages), from
	// StartOptions.FirstFrame; FrameBase is its value when the current
	// movement's conversation began. Replay scenarios are played at these
	// positions (see replay.go).
	FrameBase  int `json:"frame_base"`
	ModelTurns int `json:"model_turns"`
	// Subtasks are the subtasks spawned so far.
	Subtasks []SubtaskRecord `json:"subtasks,omitempty"`
	// Result is the user-visible result (complete.result) or the abort
	// reason; Reason says why Maestro ended the run, if it did.
	Result string `json:"result,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Seq is the sequence number of the last run event.
	Seq int `json:"seq"`

	// Accounting over every movement.
	Usage        llm.Usage `json:"usage"`
	CostUSD      float64   `json:"cost_usd"`
	CostUnknown  bool      `json:"cost_unknown,omitempty"`
	ModelCalls   int       `json:"model_calls"`
	ToolCalls    int       `json:"tool_calls"`
	ToolFailures int       `json:"tool_failures"`

	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
}

// Handoff is a summary one movement leaves for another.
type Handoff struct {
	From    string `json:"from"`
	To      string `json:"to"`
	Summary string `json:"summary"`
	// Backward is true when To had already run: From sends work back.
	Backward bool `json:"backward,omitempty"`
	// Forced is true when Maestro ended From itself; Reason says why.
	Forced bool   `json:"forced,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// Answer is a question the run asked and the user's answer.
type Answer struct {
	Movement string `json:"movement"`
	Question string `json:"question"`
	Answer   string `json:"answer"`
}

// ErrNoRun is returned by LoadState when the run directory holds no run.
var ErrNoRun = errors.New("no run state")

// ErrBusy is returned when another process works on the run.
var ErrBusy = errors.New("the run is in use by another process")

// LoadState reads the state of the run in runDir. No symbolic link is
// followed below runDir.
func LoadState(runDir string) (*State, error) { return runPath{base: runDir}.load() }

// HasState reports whether runDir holds a run's state (without following
// a symbolic link below runDir).
func HasState(runDir string) (bool, error) { return runPath{base: runDir}.has() }

// runPath locates a run directory for Maestro's own files (state, lock,
// transcripts, subtask runs): base is a directory the caller trusts (a
// session's directory, a queued task's state/, or the workspace itself
// in the layout without a separate run directory) and rel a slash path
// below it ("" for base itself). Nothing below base is followed: every
// component is opened without following a symbolic link, so a link the
// agent planted (logs → somewhere) makes the access fail with an error
// matching workspace.ErrOutside instead of leading it elsewhere.
type runPath struct {
	base string
	rel  string
}

// String returns the run directory's path.
func (p runPath) String() string { return filepath.Join(p.base, filepath.FromSlash(p.rel)) }

// child returns the run directory sub (slash path) below p.
func (p runPath) child(sub string) runPath {
	return runPath{base: p.base, rel: path.Join(p.rel, sub)}
}

// open opens the directory name (slash path, not empty) of the run
// directory; with create, missing directories are made (mode 0700).
func (p runPath) open(name string, create bool) (*workspace.Dir, error) {
	if create {
		if err := os.MkdirAll(p.base, 0o755); err != nil {
			return nil, err
		}
	}
	b, err := workspace.OpenTrusted(p.base)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	rel := path.Join(p.rel, name)
	if create {
		return b.MkdirPath(rel, 0o700)
	}
	return b.OpenPath(rel)
}

// has reports whether the run directory holds a state file.
func (p runPath) has() (bool, error) {
	d, err := p.open("logs", false)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read run state: %w", err)
	}
	defer d.Close()
	_, err = d.Lstat(path.Base(StateFile))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read run state: %w", err)
	}
	return true, nil
}

// load reads the run's state.
func (p runPath) load() (*State, error) {
	where := filepath.Join(p.String(), StateFile)
	d, err := p.open("logs", false)
	var f *os.File
	if err == nil {
		f, err = d.Open(path.Base(StateFile))
		d.Close()
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w in %s", ErrNoRun, p)
	}
	if err != nil {
		return nil, fmt.Errorf("read run state: %w", err)
	}
	data, err := io.ReadAll(f)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("read run state %s: %w", where, err)
	}
	var st State
	if err := strictJSON(data, &st); err != nil {
		return nil, fmt.Errorf("run state %s: %w", where, err)
	}
	if st.Version != StateVersion {
		return nil, fmt.Errorf("run state %s: version %d, this build reads version %d", where, st.Version, StateVersion)
	}
	return &st, nil
}

// writeFile replaces the file name (slash path) of the run directory
// atomically (a temporary file beside it, synced, renamed over it).
func (p runPath) writeFile(name string, data []byte, perm fs.FileMode) error {
	d, err := p.open(path.Dir(name), true)
	if err != nil {
		return fmt.Errorf("write %s: %w", filepath.Join(p.String(), name), err)
	}
	defer d.Close()
	if err := d.WriteFileAtomic(path.Base(name), data, perm); err != nil {
		return fmt.Errorf("write %s: %w", filepath.Join(p.String(), name), err)
	}
	return nil
}

// save writes the state atomically: a temporary file in the same
// directory, synced, renamed over the old one.
func (st *State) save(runDir string, now time.Time) error {
	return st.saveAt(runPath{base: runDir}, now)
}

func (st *State) saveAt(p runPath, now time.Time) error {
	_, err := st.saveData(p, now)
	return err
}

// saveData saves the state as saveAt does and returns the document it
// wrote.
func (st *State) saveData(p runPath, now time.Time) ([]byte, error) {
	st.Updated = now.UTC()
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode run state: %w", err)
	}
	data = append(data, '\n')
	return data, p.writeFile(StateFile, data, 0o600)
}

// writeFileAtomic replaces path with data so that a reader (or a crash)
// sees either the old or the new content, never a mix.
func writeFileAtomic(path string, data []byte, perm fs.FileMode) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	_, werr := f.Write(data)
	if werr == nil {
		werr = f.Chmod(perm)
	}
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp, path)
	}
	if werr != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, werr)
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// lockRun takes the run directory's lock for this process; the returned
// function releases it.
func lockRun(runDir string) (func(), error) { return runPath{base: runDir}.lock() }

func (p runPath) lock() (func(), error) {
	d, err := p.open("logs", true)
	if err != nil {
		return nil, fmt.Errorf("lock run: %w", err)
	}
	defer d.Close()
	name := path.Base(lockFile)
	f, err := d.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		f, err = d.Create(name, 0o600)
		if errors.Is(err, fs.ErrExist) {
			f, err = d.Open(name) // created meanwhile by another process
		}
	}
	if err != nil {
		return nil, fmt.Errorf("lock run: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("%w: %s", ErrBusy, p)
	}
	return func() {
		// Unlock first: a descriptor copy in a process forked elsewhere
		// (until its exec) would otherwise keep the run locked.
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
