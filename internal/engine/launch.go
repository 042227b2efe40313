package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/maestro-run/maestro/internal/agent"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/session"
)

// ReplayContextWindow is the context window a run on a replay provider is
// measured against (the replay model is in no catalogue), so that
// scenarios can exercise context pressure with usage statements.
const ReplayContextWindow = 200_000

// Launch is one start or resume of a piece run: the one way `maestro run`
// and a queued job begin a piece run (docs/engine.md, "Starting and
// resuming a run"). Run looks at Config.RunDir:
//
//   - a run there that waits for the user continues with the answer
//     (Answer, else Task); one that was interrupted or failed restarts its
//     current movement (Task, if any, is passed to it as a note); one
//     waiting for subtasks continues after them; one that has ended is
//     reported as it stands;
//   - an empty RunDir starts a new run of Task: the piece is Piece, else
//     Previous's piece, else the classifier's pick (on a replay provider,
//     which has no turn scripted for the classifier, FallbackPiece). A
//     classified run event comes first.
type Launch struct {
	// Config configures the engine; RunDir is the run's directory. A
	// replay provider is measured against ReplayContextWindow unless
	// ContextWindow is set.
	Config Config
	// Task is the task of a new run, or the user's word to a run that is
	// resumed.
	Task string
	// Piece forces the piece of a new run.
	Piece string
	// RunID names a new run (empty: generated).
	RunID string
	// FirstFrame is the replay position of a new run's first model turn
	// (StartOptions.FirstFrame); a follow-up of Previous continues after
	// Previous's turns instead.
	FirstFrame int
	// Previous, when set, is the state of a finished run that the new run
	// follows up: its piece is the default and the task is
	// FollowUp(Previous, Task).
	Previous *State
	// Answer, when set, gives the answer to a run that waits for the user
	// (called only then); "" leaves the run waiting (ErrNeedsAnswer). Task
	// is then not passed to a resumed run (it is the task of a new one).
	Answer func(ctx context.Context) (string, error)
}

// ClassifyError is the error of a new run whose piece could not be
// chosen (an unknown piece, a failed classifier call): no run started.
type ClassifyError struct{ Err error }

func (e *ClassifyError) Error() string { return e.Err.Error() }
func (e *ClassifyError) Unwrap() error { return e.Err }

// Run starts or resumes the run (see Launch). The Outcome is never nil.
// A run that had ended is returned with a nil error; a run waiting for
// an answer that Answer does not give returns an error matching
// ErrNeedsAnswer; a piece that cannot be chosen a *ClassifyError.
func (l Launch) Run(ctx context.Context) (*Outcome, error) {
	cfg := l.Config
	if cfg.ContextWindow == 0 && cfg.Provider != nil && isReplay(cfg.Provider) {
		cfg.ContextWindow = ReplayContextWindow
	}
	e, err := New(cfg)
	if err != nil {
		return &Outcome{Status: StatusFailed}, err
	}
	found, err := e.run.has()
	if err != nil {
		return &Outcome{Status: StatusFailed}, fmt.Errorf("read the run state: %w", err)
	}
	if found {
		return l.resume(ctx, e)
	}
	name, task, first := l.Piece, l.Task, l.FirstFrame
	if prev := l.Previous; prev != nil {
		if name == "" {
			name = prev.Piece
		}
		task, first = FollowUp(prev, task), prev.ModelTurns
	}
	// A replay run is not classified (its script has no classifier turn):
	// it takes the fallback piece, and says so rather than "given".
	replayFallback := name == "" && isReplay(cfg.Provider)
	if replayFallback {
		name = FallbackPiece
	}
	if cfg.Library == nil {
		return &Outcome{Status: StatusFailed}, &ClassifyError{Err: errors.New("no piece library is configured")}
	}
	classifier := cfg.Provider
	if cfg.ClassifierProvider != nil {
		classifier = cfg.ClassifierProvider
	}
	opts := ClassifyOptions{Override: name}
	if cfg.MCP != nil {
		opts.MCPAvailable = cfg.MCP.Configured
	}
	c, err := Classify(ctx, classifier, cfg.Library, task, opts)
	if err != nil {
		return &Outcome{Status: StatusFailed}, &ClassifyError{Err: err}
	}
	if replayFallback {
		c.Override, c.Fallback, c.Reason = false, true, "a replay run is not classified"
	}
	runID := l.RunID
	if runID == "" {
		runID = newRunID()
	}
	e.cfg.Events.RunEvent(Record{RunID: runID, Time: e.cfg.Now().UTC(), Event: c.Event()})
	return e.Start(ctx, c.Piece, task, StartOptions{RunID: runID, FirstFrame: first})
}

// resume continues the run found in the engine's run directory.
func (l Launch) resume(ctx context.Context, e *Engine) (*Outcome, error) {
	answer := l.Task
	if l.Answer != nil {
		answer = ""
		st, err := e.run.load()
		if err != nil {
			return &Outcome{Status: StatusFailed}, fmt.Errorf("read the run state: %w", err)
		}
		if st.Status == StatusWaitingHuman {
			if answer, err = l.Answer(ctx); err != nil {
				return &Outcome{Status: StatusFailed}, fmt.Errorf("read the answer: %w", err)
			}
		}
	}
	out, err := e.Resume(ctx, answer)
	if errors.Is(err, ErrFinished) {
		err = nil // the run ended before its caller recorded it
	}
	return out, err
}

// FollowUp is the task of a new run that continues the finished run prev
// with the request task.
func FollowUp(prev *State, task string) string {
	return fmt.Sprintf("This continues an earlier run (piece %s) in this workspace.\n\nEarlier task:\n%s\n\nEarlier result (%s):\n%s\n\nNew request:\n%s",
		prev.Piece, strings.TrimSpace(prev.Task), prev.Status, strings.TrimSpace(prev.Result), task)
}

// LatestRun finds the newest run of a directory of numbered runs
// (<runsDir>/1, <runsDir>/2, …; the runs of one `maestro run` session):
// its number, directory and state. n is 0 when there is none.
func LatestRun(runsDir string) (n int, dir string, st *State, err error) {
	entries, err := os.ReadDir(runsDir)
	if errors.Is(err, os.ErrNotExist) {
		return 0, "", nil, nil
	}
	if err != nil {
		return 0, "", nil, fmt.Errorf("read the session's runs: %w", err)
	}
	for _, e := range entries {
		if k, err := strconv.Atoi(e.Name()); err == nil && e.IsDir() && k > n {
			n = k
		}
	}
	if n == 0 {
		return 0, "", nil, nil
	}
	dir = filepath.Join(runsDir, strconv.Itoa(n))
	st, err = LoadState(dir)
	if err != nil {
		return 0, "", nil, err
	}
	return n, dir, st, nil
}

// SessionEvents returns the EventSink that appends run events to a session
// log as session.KindRunEvent records: the run log of `maestro run` and of
// every subtask.
func SessionEvents(s *session.Session) EventSink {
	return EventSinkFunc(func(r Record) {
		if data, err := json.Marshal(r); err == nil {
			s.RunEvent(data)
		}
	})
}

// WithStatusLines returns an EventSink that gives each run event to events
// and then shows it to view as a protocol status line (its Describe text).
// A log records a run event once, as itself; a surface that speaks only
// the headless protocol (a terminal, a stdout of JSON lines) sees it
// through this projection.
func WithStatusLines(events EventSink, view agent.Sink) EventSink {
	return EventSinkFunc(func(r Record) {
		if events != nil {
			events.RunEvent(r)
		}
		view.Event(protocol.Status{Message: r.Event.Describe()})
	})
}
