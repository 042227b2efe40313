package cli

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/maestro-run/maestro/internal/agentcli"
	"github.com/maestro-run/maestro/internal/engine"
	"github.com/maestro-run/maestro/internal/host"
	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/session"
)

// Executor badges of Maestro's own sessions.
const (
	badgeReplay   = "replay"
	badgeModel    = "model"
	badgeAgentCLI = "agent_cli"
)

// Statuses of a plain session (a piece session has its latest run's).
const (
	statusEmpty       = "empty"
	statusAnswered    = "answered"
	statusUnfinished  = "unfinished"
	statusFailed      = "failed"
	statusInterrupted = "interrupted"
	// statusRunning is a plain session a process is running now.
	statusRunning = "running"
)

// maestroSession is one of Maestro's own sessions as `maestro sessions`
// shows it.
type maestroSession struct {
	ID string `json:"id"`
	// ShortID is the shortest prefix --resume takes for it now.
	ShortID string    `json:"short_id"`
	Started time.Time `json:"started"`
	Updated time.Time `json:"updated"`
	// Workspace is the directory the agent worked in.
	Workspace string `json:"workspace"`
	// Executor is the badge: replay, model or agent_cli.
	Executor string `json:"executor"`
	Provider string `json:"provider"`
	Model    string `json:"model"`
	// Replay is the scenario of a replay session.
	Replay string `json:"replay,omitempty"`
	// Agent and AgentSession are the agent CLI and its own session id.
	Agent        string `json:"agent,omitempty"`
	AgentSession string `json:"agent_session,omitempty"`
	// Agents are the agent CLIs a piece session's movements ran on, when
	// every movement it started ran on one (executor agent_cli: the
	// session's replay model, there for want of a model, played nothing).
	Agents []string `json:"agents,omitempty"`
	// Status is the latest piece run's status (running, waiting_human,
	// succeeded, aborted, failed, cancelled, …, or interrupted: recorded
	// as running or waiting_subtasks, but no process runs it) for a piece
	// session, else how the last turn ended: answered, failed,
	// interrupted, running (a process runs it now), unfinished (stopped
	// mid-turn) or empty (no prompt yet).
	Status string `json:"status"`
	// Reason is the first line of the error a failed turn ended with.
	Reason string `json:"reason,omitempty"`
	// Piece is the latest piece run's piece.
	Piece       string `json:"piece,omitempty"`
	FirstPrompt string `json:"first_prompt"`
	// Log is the session's event log.
	Log string `json:"log"`
}

// executorLabel is the badge with what drives it: the scenario, the
// provider/model or the agent CLI.
func (s maestroSession) executorLabel() string {
	switch s.Executor {
	case badgeReplay:
		return "replay " + s.Replay
	case badgeAgentCLI:
		if len(s.Agents) > 1 {
			return "agent CLIs " + strings.Join(s.Agents, ", ")
		}
		return "agent CLI " + cmp.Or(s.Agent, strings.Join(s.Agents, ""))
	}
	return "model " + s.Provider + "/" + s.Model
}

// statusLabel is the status, with the piece of a piece session.
func (s maestroSession) statusLabel() string {
	if s.Piece != "" {
		return s.Piece + ": " + s.Status
	}
	return s.Status
}

// describeSession reads what `maestro sessions` shows of meta from the
// session's log and latest piece run (read only: a running session is
// not disturbed). ids are every id of the store, for the short id.
func describeSession(store *session.Store, meta session.Meta, ids []string) maestroSession {
	s := maestroSession{
		ID: meta.ID, ShortID: session.ShortestUniquePrefix(meta.ID, ids, time.Now()), Started: meta.CreatedAt, Updated: meta.UpdatedAt,
		Workspace: meta.Workspace, Provider: meta.Provider, Model: meta.Model, Replay: meta.Replay,
		Agent: meta.Agent, AgentSession: meta.AgentSession, FirstPrompt: meta.Title,
		Log: filepath.Join(store.Dir(), meta.ID, "events.jsonl"),
	}
	switch {
	case meta.Agent != "":
		s.Executor = badgeAgentCLI
	case meta.ExecutorType == protocol.ExecutorReplay:
		s.Executor = badgeReplay
	default:
		s.Executor = badgeModel
	}
	var agents []string
	s.Status, s.Reason, agents = turnStatus(store, meta.ID)
	if _, _, st, err := engine.LatestRun(filepath.Join(store.Dir(), meta.ID, "runs")); err == nil && st != nil {
		s.Status, s.Piece = string(st.Status), st.Piece
	}
	if s.Executor != badgeAgentCLI && len(agents) > 0 {
		// A piece whose every movement ran on an agent CLI: the replay
		// (or model) the session holds ran none of them.
		s.Executor, s.Agents = badgeAgentCLI, agents
	}
	// A log says what was started, not whether a process still runs it:
	// the session's lock does.
	switch {
	case s.Piece != "" && s.Status == string(engine.StatusRunning) && !logInUse(s.Log):
		s.Status, s.Reason = statusInterrupted, "no process runs it now (Ctrl-C, or its process was killed, crashed or lost its terminal): maestro run --resume restarts the movement"
	case s.Piece != "" && s.Status == string(engine.StatusWaitingSubtasks) && !logInUse(s.Log):
		// A local run's subtasks run in its process: they stopped with it.
		s.Status, s.Reason = statusInterrupted, "no process runs it or its subtasks now (Ctrl-C, or its process was killed, crashed or lost its terminal): maestro run --resume ends the unfinished subtasks as interrupted and goes on with the movement"
	case s.Piece == "" && s.Status == statusUnfinished && logInUse(s.Log):
		s.Status = statusRunning
	}
	return s
}

// logInUse says whether a process holds the session log's lock (the
// exclusive flock of internal/session), i.e. runs the session now. It
// asks for a shared lock without waiting and, granted, gives it back at
// once: a running session is not disturbed.
func logInUse(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		return errors.Is(err, syscall.EWOULDBLOCK)
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false
}

// turnStatus says how a plain session's last turn ended, from its log: a
// prompt starts a turn (unfinished until an answer), an error event ends
// it (failed, or interrupted when cancelled) whatever is logged after it
// in the same turn. agents are the agent CLIs the piece movements of the
// log ran on, in their first run's order, when every movement_started
// names one (nil when none does, or one ran on Maestro's own loop).
func turnStatus(store *session.Store, id string) (status, reason string, agents []string) {
	status = statusEmpty
	ended, ownLoop := false, false
	defer func() {
		if ownLoop {
			agents = nil
		}
	}()
	for rec, err := range store.Records(id, 0) {
		if err != nil {
			return status, reason, agents
		}
		switch {
		case rec.Kind == session.KindRunEvent:
			if agent, ok := movementAgent(rec.Event); ok {
				if agent == "" {
					ownLoop = true
				} else if !slices.Contains(agents, agent) {
					agents = append(agents, agent)
				}
			}
		case rec.Kind == session.KindMessage && rec.Message != nil:
			m := rec.Message
			switch {
			case m.Role == llm.RoleUser && m.TextContent() != "":
				status, reason, ended = statusUnfinished, "", false
			case ended:
			case m.Role == llm.RoleAssistant && len(m.ToolCalls()) == 0:
				status = statusAnswered
			default:
				status = statusUnfinished
			}
		case rec.EventType() == protocol.TypeError:
			var e protocol.Error
			if json.Unmarshal(rec.Event, &e) != nil || e.RequestID != "" {
				continue // a client's bad request, not the turn's end
			}
			status, reason, ended = statusFailed, firstLine(e.Message, 200), true
			if e.ErrorType == protocol.ErrorCancelled {
				status, reason = statusInterrupted, ""
			}
		case ended:
		case rec.EventType() == protocol.TypeResponseEnd:
			status = statusAnswered // agent CLIs log events only
		case rec.EventType() == protocol.TypeToolCall:
			status = statusUnfinished
		}
	}
	return status, reason, agents
}

// movementAgent is the agent CLI of a movement_started run event ("":
// Maestro's own loop); ok is false for any other run event.
func movementAgent(data json.RawMessage) (agent string, ok bool) {
	if !bytes.Contains(data, []byte(engine.KindMovementStarted)) {
		return "", false
	}
	var ev struct {
		Kind engine.EventKind `json:"kind"`
		Data struct {
			Agent string `json:"agent"`
		} `json:"data"`
	}
	if json.Unmarshal(data, &ev) != nil || ev.Kind != engine.KindMovementStarted {
		return "", false
	}
	return ev.Data.Agent, true
}

// sessionStoreOfHost is the store of Maestro's own sessions.
func sessionStoreOfHost(io *IOStreams) (*session.Store, error) {
	h, err := host.New(host.Options{Getenv: io.Getenv})
	if err != nil {
		return nil, failErr(err)
	}
	return h.Sessions(), nil
}

// listSessions returns the store's sessions, newest first, and their ids.
func listSessions(store *session.Store) ([]session.Meta, []string, error) {
	metas, err := store.List()
	if err != nil {
		return nil, nil, failErr(err)
	}
	ids := make([]string, len(metas))
	for i, m := range metas {
		ids[i] = m.ID
	}
	return metas, ids, nil
}

// listMaestroSessions prints Maestro's own sessions, newest first; dir,
// when set, keeps those of that workspace.
func listMaestroSessions(io *IOStreams, dir string, limit int, asJSON bool) error {
	store, err := sessionStoreOfHost(io)
	if err != nil {
		return err
	}
	metas, ids, err := listSessions(store)
	if err != nil {
		return err
	}
	list := []maestroSession{}
	for _, m := range metas {
		if dir != "" && m.Workspace != dir {
			continue
		}
		if limit > 0 && len(list) == limit {
			break
		}
		list = append(list, describeSession(store, m, ids))
	}
	if asJSON {
		enc := json.NewEncoder(io.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(list)
	}
	if len(list) == 0 {
		where := store.Dir()
		if dir != "" {
			where += " for workspace " + dir
		}
		fmt.Fprintf(io.ErrOut, "no Maestro sessions in %s; start one with maestro run \"…\"\n", where)
		return nil
	}
	w := tabwriter.NewWriter(io.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tSTARTED\tEXECUTOR\tSTATUS\tWORKSPACE\tFIRST PROMPT")
	for _, s := range list {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", s.ShortID, formatTime(s.Started), s.executorLabel(), s.statusLabel(), s.Workspace, firstLine(cmp.Or(s.FirstPrompt, "-"), 60))
	}
	return w.Flush()
}

// showMaestroSession prints one of Maestro's own sessions: what list
// shows, then its conversation.
func showMaestroSession(ctx context.Context, io *IOStreams, id string, asJSON bool) error {
	store, err := sessionStoreOfHost(io)
	if err != nil {
		return err
	}
	meta, err := store.Meta(id)
	if errors.Is(err, session.ErrNotFound) {
		return failErr(noMaestroSession(ctx, io, err, id, "maestro sessions show --agent %[1]s %[2]s"))
	}
	if err != nil {
		return failErr(err) // an ambiguous prefix lists the candidates
	}
	_, ids, err := listSessions(store)
	if err != nil {
		return err
	}
	s := describeSession(store, meta, ids)
	var msgs []maestroMessage
	// history is how many messages the model's conversation holds: the
	// last ones of msgs, since a summary is placed before those it kept.
	history := 0
	// answeredBy is the model the last response_end named (an agent
	// CLI's stream names its own, where the session says "default").
	answeredBy := ""
	for rec, err := range store.Records(meta.ID, 0) {
		if err != nil {
			return failErr(fmt.Errorf("read session %s: %w", meta.ID, err))
		}
		if m := responseModel(rec); m != "" {
			answeredBy = m
		}
		if rec.Kind != session.KindMessage || rec.Message == nil {
			continue
		}
		m := maestroMessage{SessionMessage: transcriptMessage(*rec.Message, rec.Time, cmp.Or(answeredBy, meta.Model))}
		if rec.Message.Role == llm.RoleAssistant {
			answeredBy = ""
		}
		c := rec.Message.Compaction
		if c == nil {
			msgs, history = append(msgs, m), history+1
			continue
		}
		// A summary replaces the conversation before it but its Kept
		// latest messages (llm.AppendHistory): it is shown where those
		// it replaced end, before the ones it kept, as the model reads it.
		kept := min(max(c.Kept, 0), history)
		m.Compaction = &messageCompaction{Compaction: *c, Replaced: history - kept}
		msgs = slices.Insert(msgs, len(msgs)-kept, m)
		history = 1 + kept
	}
	if asJSON {
		if msgs == nil {
			msgs = []maestroMessage{}
		}
		enc := json.NewEncoder(io.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Session  maestroSession   `json:"session"`
			Messages []maestroMessage `json:"messages"`
		}{s, msgs})
	}
	fmt.Fprintf(io.Out, "session   %s\nresume    maestro run --resume %s \"…\"\n", s.ID, s.ShortID)
	fmt.Fprintf(io.Out, "prompt    %s\nworkspace %s\nstarted   %s\nupdated   %s\nexecutor  %s\nstatus    %s\n",
		firstLine(cmp.Or(s.FirstPrompt, "-"), 100), s.Workspace, formatTime(s.Started), formatTime(s.Updated), s.executorLabel(), s.statusLabel())
	if s.Reason != "" {
		fmt.Fprintf(io.Out, "reason    %s\n", s.Reason)
	}
	if s.AgentSession != "" {
		fmt.Fprintf(io.Out, "agent id  %s\n", s.AgentSession)
	}
	fmt.Fprintf(io.Out, "messages  %d\nlog       %s\n", len(msgs), s.Log)
	for _, m := range msgs {
		if m.Compaction == nil {
			printMessages(io, []agentcli.SessionMessage{m.SessionMessage})
			continue
		}
		c := m.Compaction
		fmt.Fprintf(io.Out, "\n[%s] compaction: from here the model reads this summary instead of the %d message(s) above, then the %d below (about %d → %d tokens)\n",
			formatTime(m.Time), c.Replaced, c.Kept, c.TokensBefore, c.TokensAfter)
		fmt.Fprintf(io.Out, "  %s\n", indentText(m.Text))
	}
	return nil
}

// responseModel is the model_id of a response_end event record, "" for
// any other record.
func responseModel(rec session.Record) string {
	if rec.Kind != session.KindEvent || !bytes.Contains(rec.Event, []byte(`"response_end"`)) {
		return ""
	}
	var end struct {
		Type  string `json:"type"`
		Usage struct {
			ModelID string `json:"model_id"`
		} `json:"usage"`
	}
	if json.Unmarshal(rec.Event, &end) != nil || end.Type != "response_end" {
		return ""
	}
	return end.Usage.ModelID
}

// maestroMessage is a message of `maestro sessions show` for Maestro's
// own sessions: a transcript message, and what a compaction summary did.
type maestroMessage struct {
	agentcli.SessionMessage
	Compaction *messageCompaction `json:"compaction,omitempty"`
}

// messageCompaction is a summary's llm.Compaction and how many messages of
// the conversation it replaced.
type messageCompaction struct {
	llm.Compaction
	Replaced int `json:"replaced"`
}

// transcriptMessage is a conversation message of Maestro's log in the
// transcript form agent CLI sessions are shown in.
func transcriptMessage(m llm.Message, at time.Time, model string) agentcli.SessionMessage {
	out := agentcli.SessionMessage{Role: agentcli.RoleUser, Time: at}
	if m.Role == llm.RoleAssistant {
		out.Role, out.Model = agentcli.RoleAssistant, model
	}
	var text, thinking []string
	for _, p := range m.Parts {
		switch {
		case p.ToolCall != nil:
			out.ToolCalls = append(out.ToolCalls, agentcli.SessionToolCall{ID: p.ToolCall.ID, Name: p.ToolCall.Name, Input: p.ToolCall.Input})
		case p.ToolResult != nil:
			out.Role = agentcli.RoleTool
			out.ToolResults = append(out.ToolResults, agentcli.SessionToolResult{ID: p.ToolResult.CallID, Name: p.ToolResult.Name, Output: p.ToolResult.Content, IsError: p.ToolResult.IsError})
		case p.Type == llm.PartThinking:
			thinking = append(thinking, p.Text)
		case p.Type == llm.PartText:
			text = append(text, p.Text)
		}
	}
	out.Text, out.Thinking = strings.Join(text, "\n"), strings.Join(thinking, "\n")
	return out
}
