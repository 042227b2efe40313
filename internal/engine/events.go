package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/maestro-run/maestro/internal/oneline"
)

// EventKind names a run event. Run events are workflow-level facts
// (a movement started, a transition, a pressure step, the run completed);
// they are not headless-protocol messages. They go to the run's event log
// as [Record]s, once; a surface that speaks only the protocol shows each as
// a status line (WithStatusLines).
type EventKind string

// The run event kinds.
const (
	KindRunStarted      EventKind = "run_started"
	KindClassified      EventKind = "classified"
	KindMovementStarted EventKind = "movement_started"
	KindToolsOmitted    EventKind = "tools_omitted"
	KindReminder        EventKind = "reminder"
	KindPressure        EventKind = "pressure"
	KindTransition      EventKind = "transition"
	KindLessons         EventKind = "lessons"
	KindSubtaskSpawned  EventKind = "subtask_spawned"
	KindSubtaskFinished EventKind = "subtask_finished"
	KindWaiting         EventKind = "waiting"
	KindResumed         EventKind = "resumed"
	KindComplete        EventKind = "complete"
	KindFirewallBlock   EventKind = "firewall_block"
)

// Event is one run event. The set is closed: it is implemented only by
// the types of this file.
type Event interface {
	// Kind names the event.
	Kind() EventKind
	// Describe is a one-line, human-readable account of the event (the
	// protocol status line shown for it).
	Describe() string
}

// RunStarted: a run of a piece began.
type RunStarted struct {
	Piece           string `json:"piece"`
	Task            string `json:"task"`
	InitialMovement string `json:"initial_movement"`
	MaxMovements    int    `json:"max_movements"`
	// Subtask is the subtask number when this run is a subtask, else 0.
	Subtask int `json:"subtask,omitempty"`
}

// Classified: the classifier chose the piece for a task.
type Classified struct {
	Piece  string `json:"piece"`
	Reason string `json:"reason"`
	// Fallback is true when the model's answer was unusable and the
	// fallback piece was chosen.
	Fallback bool `json:"fallback,omitempty"`
	// Override is true when the piece was given and no model was asked.
	Override bool `json:"override,omitempty"`
	// Offered lists the pieces the model could choose from.
	Offered []string `json:"offered,omitempty"`
}

// Entry says how a movement was entered.
type Entry string

// The ways a movement is entered.
const (
	// EntryStart: the run's initial movement.
	EntryStart Entry = "start"
	// EntryTransition: a transition (by the model or a fallback).
	EntryTransition Entry = "transition"
	// EntrySubtasks: the same movement again after WAIT_SUBTASKS.
	EntrySubtasks Entry = "subtasks"
	// EntryAnswer: the same movement, continued with the user's answer.
	EntryAnswer Entry = "answer"
	// EntryRestart: the same movement started again after an
	// interruption or a failure (Resume of an unfinished run).
	EntryRestart Entry = "restart"
)

// MovementStarted: a movement's agent loop is about to run.
type MovementStarted struct {
	Movement string `json:"movement"`
	// Number counts movements executed in this run, this one included.
	Number       int   `json:"number"`
	MaxMovements int   `json:"max_movements"`
	Entry        Entry `json:"entry"`
	// Revisits is how many times in a row the run has come back to this
	// movement (see docs/engine.md).
	Revisits int `json:"revisits,omitempty"`
	// Tools are the tools offered to the model, control tools included.
	Tools []string `json:"tools"`
	// Agent is the agent CLI the movement runs on (empty: Maestro's loop).
	Agent string `json:"agent,omitempty"`
}

// OmittedTool is an allowed_tools entry the movement could not be offered.
type OmittedTool struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// ToolsOmitted: allowed_tools entries that are valid but not offered.
type ToolsOmitted struct {
	Movement string        `json:"movement"`
	Tools    []OmittedTool `json:"tools"`
}

// Reminder: the model answered without calling transition or complete.
type Reminder struct {
	Movement string `json:"movement"`
	Count    int    `json:"count"`
	Max      int    `json:"max"`
}

// PressureSource is what a pressure step is about.
type PressureSource string

// Pressure sources.
const (
	PressureContext PressureSource = "context"
	PressureRevisit PressureSource = "revisit"
	PressureCycle   PressureSource = "cycle"
)

// PressureLevel is how strong a pressure step is.
type PressureLevel string

// Pressure levels, in increasing strength.
const (
	// LevelWarn: a note to the model.
	LevelWarn PressureLevel = "warn"
	// LevelPrompt: the model is asked to wrap up now.
	LevelPrompt PressureLevel = "prompt"
	// LevelForce: Maestro ends the movement itself.
	LevelForce PressureLevel = "force"
	// LevelAbort: Maestro aborts the run.
	LevelAbort PressureLevel = "abort"
)

// Pressure: a context-pressure or loop-control step.
type Pressure struct {
	Movement string         `json:"movement"`
	Source   PressureSource `json:"source"`
	Level    PressureLevel  `json:"level"`
	// Percent, Tokens and Window describe context occupancy (source
	// context).
	Percent int   `json:"percent,omitempty"`
	Tokens  int64 `json:"tokens,omitempty"`
	Window  int64 `json:"window,omitempty"`
	// Count and Limit describe revisits or cycle laps (sources revisit
	// and cycle); With is the other movement of a cycle.
	Count int    `json:"count,omitempty"`
	Limit int    `json:"limit,omitempty"`
	With  string `json:"with,omitempty"`
}

// Transition: the run moved from one movement to another (or to
// WAIT_SUBTASKS).
type Transition struct {
	From    string `json:"from"`
	To      string `json:"to"`
	Summary string `json:"summary"`
	// Forced is true when Maestro chose default_next itself; Reason says
	// why (reminders, context, iterations).
	Forced bool   `json:"forced,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// Lessons: a transition added lessons to the run's memory.
type Lessons struct {
	Movement string   `json:"movement"`
	Added    []string `json:"added"`
	Total    int      `json:"total"`
}

// SubtaskSpawned: SpawnSubTask started (or queued) a subtask.
type SubtaskSpawned struct {
	ID       int    `json:"id"`
	Name     string `json:"name"`
	Piece    string `json:"piece"`
	Task     string `json:"task"`
	Movement string `json:"movement"`
	// Job is the subtask's child job when it runs as one (SubtaskJobs).
	Job int64 `json:"job,omitempty"`
}

// SubtaskFinished: a subtask reached a final state.
type SubtaskFinished struct {
	ID     int       `json:"id"`
	Name   string    `json:"name"`
	Status RunStatus `json:"status"`
	Result string    `json:"result"`
	// File is the result file, relative to the run directory.
	File string `json:"file"`
	// Session and Log link the subtask's own session log: its id, and
	// its events.jsonl relative to the run directory (empty when the
	// subtask never started).
	Session string `json:"session,omitempty"`
	Log     string `json:"log,omitempty"`
	// Job is the subtask's child job when it ran as one (SubtaskJobs):
	// its own job log holds the subtask's events.
	Job int64 `json:"job,omitempty"`
}

// Waiting: the run waits for subtasks or for the user.
type Waiting struct {
	Movement string `json:"movement"`
	// For is "subtasks" or "user".
	For      string `json:"for"`
	Question string `json:"question,omitempty"`
	Subtasks int    `json:"subtasks,omitempty"`
}

// Resumed: a paused or interrupted run continues.
type Resumed struct {
	Movement string `json:"movement"`
	Entry    Entry  `json:"entry"`
	Answer   string `json:"answer,omitempty"`
}

// Complete: the run ended.
type Complete struct {
	Movement string    `json:"movement"`
	Status   RunStatus `json:"status"`
	Result   string    `json:"result"`
	// Reason says why Maestro ended the run, when it did (not the model).
	Reason string `json:"reason,omitempty"`
}

// FirewallBlock: the network guard refused a web tool's destination
// (internal/netguard; docs/web-tools.md).
type FirewallBlock struct {
	Movement string `json:"movement"`
	Tool     string `json:"tool"`
	// URL is the URL refused (for a redirect, its target; at connect
	// time, host:port).
	URL  string `json:"url"`
	Host string `json:"host"`
	// Address is the refused IP address ("" when the scheme was refused).
	Address string `json:"address,omitempty"`
	// Class is the address class (loopback, private, cloud_metadata, …)
	// or "scheme".
	Class string `json:"class"`
	// Stage is where it was refused: url, resolve, connect or redirect.
	Stage string `json:"stage"`
}

// Kind implements Event.
func (RunStarted) Kind() EventKind { return KindRunStarted }

// Kind implements Event.
func (Classified) Kind() EventKind { return KindClassified }

// Kind implements Event.
func (MovementStarted) Kind() EventKind { return KindMovementStarted }

// Kind implements Event.
func (ToolsOmitted) Kind() EventKind { return KindToolsOmitted }

// Kind implements Event.
func (Reminder) Kind() EventKind { return KindReminder }

// Kind implements Event.
func (Pressure) Kind() EventKind { return KindPressure }

// Kind implements Event.
func (Transition) Kind() EventKind { return KindTransition }

// Kind implements Event.
func (Lessons) Kind() EventKind { return KindLessons }

// Kind implements Event.
func (SubtaskSpawned) Kind() EventKind { return KindSubtaskSpawned }

// Kind implements Event.
func (SubtaskFinished) Kind() EventKind { return KindSubtaskFinished }

// Kind implements Event.
func (Waiting) Kind() EventKind { return KindWaiting }

// Kind implements Event.
func (Resumed) Kind() EventKind { return KindResumed }

// Kind implements Event.
func (Complete) Kind() EventKind { return KindComplete }

// Kind implements Event.
func (FirewallBlock) Kind() EventKind { return KindFirewallBlock }

// Describe implements Event.
func (e RunStarted) Describe() string {
	return fmt.Sprintf("piece %s: starting at %s (at most %d movements)", e.Piece, e.InitialMovement, e.MaxMovements)
}

// Describe implements Event.
func (e Classified) Describe() string {
	switch {
	case e.Override:
		return fmt.Sprintf("piece %s (given)", e.Piece)
	case e.Fallback:
		return fmt.Sprintf("piece %s (fallback: %s)", e.Piece, e.Reason)
	}
	return fmt.Sprintf("piece %s chosen by the classifier: %s", e.Piece, e.Reason)
}

// Describe implements Event.
func (e MovementStarted) Describe() string {
	s := fmt.Sprintf("movement %s (%d of at most %d)", e.Movement, e.Number, e.MaxMovements)
	switch e.Entry {
	case EntrySubtasks:
		s += " resumed with the subtask results"
	case EntryAnswer:
		s += " resumed with the user's answer"
	case EntryRestart:
		s += " restarted"
	}
	if e.Revisits > 0 {
		s += fmt.Sprintf(", revisit %d", e.Revisits)
	}
	if e.Agent != "" {
		s += " on agent CLI " + e.Agent
	}
	return s
}

// Describe implements Event.
func (e ToolsOmitted) Describe() string {
	parts := make([]string, len(e.Tools))
	for i, t := range e.Tools {
		parts[i] = t.Name + " (" + t.Reason + ")"
	}
	return fmt.Sprintf("movement %s: not offered: %s", e.Movement, strings.Join(parts, "; "))
}

// Describe implements Event.
func (e FirewallBlock) Describe() string {
	if e.Class == "scheme" {
		return fmt.Sprintf("movement %s: %s refused %s: only http and https are fetched", e.Movement, e.Tool, e.URL)
	}
	return fmt.Sprintf("movement %s: %s refused %s: %s is a %s address (%s)", e.Movement, e.Tool, e.URL, e.Address, e.Class, e.Stage)
}

// Describe implements Event.
func (e Reminder) Describe() string {
	return fmt.Sprintf("movement %s: the model answered without transition or complete; reminder %d of %d", e.Movement, e.Count, e.Max)
}

// Describe implements Event.
func (e Pressure) Describe() string {
	switch e.Source {
	case PressureContext:
		what := map[PressureLevel]string{
			LevelWarn:   "warning the model",
			LevelPrompt: "asking the model to summarise and transition",
			LevelForce:  "ending the movement",
		}[e.Level]
		return fmt.Sprintf("movement %s: context %d%% full (%d of %d tokens): %s", e.Movement, e.Percent, e.Tokens, e.Window, what)
	case PressureCycle:
		if e.Level == LevelAbort {
			return fmt.Sprintf("movements %s and %s alternated %d times (limit %d): aborting the run", e.Movement, e.With, e.Count, e.Limit)
		}
		return fmt.Sprintf("movements %s and %s have alternated %d times (limit %d)", e.Movement, e.With, e.Count, e.Limit)
	}
	if e.Level == LevelAbort {
		return fmt.Sprintf("movement %s revisited %d times in a row (limit %d): aborting the run", e.Movement, e.Count, e.Limit)
	}
	return fmt.Sprintf("movement %s revisited %d times in a row (limit %d)", e.Movement, e.Count, e.Limit)
}

// Describe implements Event.
func (e Transition) Describe() string {
	s := fmt.Sprintf("%s → %s", e.From, e.To)
	if e.Forced {
		s += " (forced: " + e.Reason + ")"
	}
	return s + ": " + oneline.Cut(e.Summary, 160)
}

// Describe implements Event.
func (e Lessons) Describe() string {
	return fmt.Sprintf("lessons from %s: %s (%d kept)", e.Movement, oneline.Cut(strings.Join(e.Added, "; "), 160), e.Total)
}

// Describe implements Event.
func (e SubtaskSpawned) Describe() string {
	return fmt.Sprintf("subtask %d (%s, piece %s) spawned: %s", e.ID, e.Name, e.Piece, oneline.Cut(e.Task, 120))
}

// Describe implements Event.
func (e SubtaskFinished) Describe() string {
	return fmt.Sprintf("subtask %d (%s) %s: %s", e.ID, e.Name, e.Status, oneline.Cut(e.Result, 120))
}

// Describe implements Event.
func (e Waiting) Describe() string {
	if e.For == "user" {
		return fmt.Sprintf("movement %s asks: %s", e.Movement, oneline.Cut(e.Question, 200))
	}
	return fmt.Sprintf("movement %s waits for %d subtask(s)", e.Movement, e.Subtasks)
}

// Describe implements Event.
func (e Resumed) Describe() string {
	return fmt.Sprintf("run resumed at %s (%s)", e.Movement, e.Entry)
}

// Describe implements Event.
func (e Complete) Describe() string {
	s := fmt.Sprintf("run %s in %s", e.Status, e.Movement)
	switch {
	case e.Reason == "":
	case e.Status == StatusSucceeded:
		// Maestro ended it by the movement's default_next (COMPLETE):
		// "succeeded in work: the agent's final message has no valid
		// tag" read like a failure.
		s += " by its default_next, since " + e.Reason
	default:
		s += ": " + e.Reason
	}
	return s
}

// Record is a run event as stored in an event log: the event with the run
// it belongs to, its sequence number in that run (1, 2, …, continuing
// across resumes) and when it happened. Its JSON form is
//
//	{"kind": "transition", "run_id": "…", "seq": 7, "time": "…", "data": {…}}
type Record struct {
	RunID string
	Seq   int
	Time  time.Time
	Event Event
}

type recordJSON struct {
	Kind  EventKind       `json:"kind"`
	RunID string          `json:"run_id"`
	Seq   int             `json:"seq"`
	Time  time.Time       `json:"time"`
	Data  json.RawMessage `json:"data"`
}

// MarshalJSON encodes the record with its event's kind.
func (r Record) MarshalJSON() ([]byte, error) {
	if r.Event == nil {
		return nil, errors.New("run event record without an event")
	}
	data, err := json.Marshal(r.Event)
	if err != nil {
		return nil, fmt.Errorf("encode %s event: %w", r.Event.Kind(), err)
	}
	return json.Marshal(recordJSON{Kind: r.Event.Kind(), RunID: r.RunID, Seq: r.Seq, Time: r.Time, Data: data})
}

// UnmarshalJSON decodes a record strictly: an unknown kind or an unknown
// field is an error.
func (r *Record) UnmarshalJSON(data []byte) error {
	var raw recordJSON
	if err := strictJSON(data, &raw); err != nil {
		return fmt.Errorf("decode run event record: %w", err)
	}
	ev, err := newEvent(raw.Kind)
	if err != nil {
		return err
	}
	if err := strictJSON(raw.Data, ev); err != nil {
		return fmt.Errorf("decode %s event: %w", raw.Kind, err)
	}
	*r = Record{RunID: raw.RunID, Seq: raw.Seq, Time: raw.Time, Event: deref(ev)}
	return nil
}

// newEvent returns a pointer to a zero event of kind k.
func newEvent(k EventKind) (any, error) {
	switch k {
	case KindRunStarted:
		return &RunStarted{}, nil
	case KindClassified:
		return &Classified{}, nil
	case KindMovementStarted:
		return &MovementStarted{}, nil
	case KindToolsOmitted:
		return &ToolsOmitted{}, nil
	case KindReminder:
		return &Reminder{}, nil
	case KindPressure:
		return &Pressure{}, nil
	case KindTransition:
		return &Transition{}, nil
	case KindLessons:
		return &Lessons{}, nil
	case KindSubtaskSpawned:
		return &SubtaskSpawned{}, nil
	case KindSubtaskFinished:
		return &SubtaskFinished{}, nil
	case KindWaiting:
		return &Waiting{}, nil
	case KindResumed:
		return &Resumed{}, nil
	case KindComplete:
		return &Complete{}, nil
	case KindFirewallBlock:
		return &FirewallBlock{}, nil
	}
	return nil, fmt.Errorf("unknown run event kind %q", k)
}

// deref turns the pointer from newEvent into the value Event.
func deref(p any) Event {
	switch e := p.(type) {
	case *RunStarted:
		return *e
	case *Classified:
		return *e
	case *MovementStarted:
		return *e
	case *ToolsOmitted:
		return *e
	case *Reminder:
		return *e
	case *Pressure:
		return *e
	case *Transition:
		return *e
	case *Lessons:
		return *e
	case *SubtaskSpawned:
		return *e
	case *SubtaskFinished:
		return *e
	case *Waiting:
		return *e
	case *Resumed:
		return *e
	case *Complete:
		return *e
	case *FirewallBlock:
		return *e
	}
	panic(fmt.Sprintf("engine: deref of %T", p))
}

func strictJSON(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("data after the JSON value")
	}
	return nil
}

// EventSink receives a run's events. It may be called from several
// goroutines (subtasks) and must be safe for it.
type EventSink interface {
	RunEvent(r Record)
}

// EventSinkFunc adapts a function to an EventSink.
type EventSinkFunc func(Record)

// RunEvent calls f.
func (f EventSinkFunc) RunEvent(r Record) { f(r) }
