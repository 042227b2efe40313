package runtime

import (
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/maestro-run/maestro/internal/protocol"
)

// state is the runtime state of wire contract §7, maintained by applying every
// published message (apply) and the client messages that change it
// (applyClient): the same reducer rules clients apply. Connection fields
// are not kept here; snapshots take them from the live connection table.
type state struct {
	s protocol.RuntimeState
	// Growing texts are kept in builders (appending to the strings of s
	// would copy them on every chunk) and copied into s by snapshot.
	text, thinking strings.Builder
	toolOut        map[string]*strings.Builder
	cmdOut         map[string]*tailBuffer
}

func newState() state {
	return state{toolOut: map[string]*strings.Builder{}, cmdOut: map[string]*tailBuffer{}}
}

func item(callID, requestID, tool string, args []byte) protocol.PendingItem {
	if requestID == callID {
		requestID = ""
	}
	return protocol.PendingItem{CallID: callID, RequestID: requestID, Tool: tool, Args: args}
}

// itemID is the key of a pending item: its request id, else its call id.
func itemID(it protocol.PendingItem) string {
	if it.RequestID != "" {
		return it.RequestID
	}
	return it.CallID
}

func upsert(list []protocol.PendingItem, it protocol.PendingItem) []protocol.PendingItem {
	id := itemID(it)
	list = slices.DeleteFunc(list, func(x protocol.PendingItem) bool { return itemID(x) == id })
	return append(list, it)
}

func removeID(list []protocol.PendingItem, id string) []protocol.PendingItem {
	return slices.DeleteFunc(list, func(x protocol.PendingItem) bool { return itemID(x) == id })
}

func removeCall(list []protocol.PendingItem, callID string) []protocol.PendingItem {
	return slices.DeleteFunc(list, func(x protocol.PendingItem) bool { return x.CallID == callID })
}

// pendingList returns the pending list of a request type.
func (st *state) pendingList(t protocol.RequestType) *[]protocol.PendingItem {
	switch t {
	case protocol.RequestApproval:
		return &st.s.PendingApprovals
	case protocol.RequestClientTool:
		return &st.s.PendingClientTools
	case protocol.RequestMCPElicitation:
		return &st.s.PendingMCPElicitations
	case protocol.RequestUserInput:
		return &st.s.PendingUserInputs
	case protocol.RequestToolRetry:
		return &st.s.PendingToolRetries
	}
	return nil
}

// apply folds one server → client message into the state.
func (st *state) apply(m protocol.Message) {
	s := &st.s
	switch m := m.(type) {
	case protocol.Ready:
		s.ProtocolVersion, s.Model, s.Provider = m.ProtocolVersion, m.Model, m.Provider
		s.SessionID = nullable(m.SessionID)
		s.IsReady = true
	case protocol.SessionInfo:
		s.SessionID = nullable(m.SessionID)
		s.Cwd = m.Cwd
		s.GitBranch = nullable(m.GitBranch)
	case protocol.ResponseStart:
		s.CurrentResponse = &protocol.CurrentResponse{ResponseID: m.ResponseID}
		st.text.Reset()
		st.thinking.Reset()
		s.IsResponding = true
	case protocol.ResponseChunk:
		if c := s.CurrentResponse; c != nil && c.ResponseID == m.ResponseID {
			if m.IsThinking {
				st.thinking.WriteString(m.Content)
			} else {
				st.text.WriteString(m.Content)
			}
		}
	case protocol.ResponseEnd:
		d := m.DurationMS
		s.LastResponseDurationMS = &d
		s.LastTTFTMS = m.TTFTMS
		s.CurrentResponse = nil
		s.IsResponding = false
	case protocol.ToolCall:
		s.TrackedTools = upsert(s.TrackedTools, item(m.CallID, "", m.Tool, m.Args))
		if m.RequiresApproval {
			s.PendingApprovals = upsert(s.PendingApprovals, item(m.CallID, "", m.Tool, m.Args))
		}
	case protocol.ToolStart:
		name := "unknown"
		for _, t := range s.TrackedTools {
			if t.CallID == m.CallID {
				name = t.Tool
			}
		}
		s.ActiveTools = slices.DeleteFunc(s.ActiveTools, func(a protocol.ActiveTool) bool { return a.CallID == m.CallID })
		s.ActiveTools = append(s.ActiveTools, protocol.ActiveTool{CallID: m.CallID, Tool: name})
		st.toolOut[m.CallID] = &strings.Builder{}
	case protocol.ToolOutput:
		if b := st.toolOut[m.CallID]; b != nil {
			b.WriteString(m.Content)
		}
	case protocol.ToolEnd:
		s.ActiveTools = slices.DeleteFunc(s.ActiveTools, func(a protocol.ActiveTool) bool { return a.CallID == m.CallID })
		delete(st.toolOut, m.CallID)
		for _, l := range []*[]protocol.PendingItem{&s.PendingApprovals, &s.PendingClientTools, &s.PendingMCPElicitations, &s.PendingUserInputs, &s.PendingToolRetries, &s.TrackedTools} {
			*l = removeCall(*l, m.CallID)
		}
	case protocol.ClientToolRequest:
		s.TrackedTools = upsert(s.TrackedTools, item(m.CallID, "", m.Tool, m.Args))
		if m.Tool == AskUserTool {
			s.PendingUserInputs = upsert(s.PendingUserInputs, item(m.CallID, "", m.Tool, m.Args))
		} else {
			s.PendingClientTools = upsert(s.PendingClientTools, item(m.CallID, "", m.Tool, m.Args))
		}
	case protocol.ServerRequest:
		it := item(m.CallID, m.RequestID, m.Tool, m.Args)
		it.DisplayName, it.SummaryLabel, it.ActionDescription = m.DisplayName, m.SummaryLabel, m.ActionDescription
		if m.RequestType != protocol.RequestToolRetry && m.RequestType != protocol.RequestMCPElicitation {
			s.TrackedTools = upsert(s.TrackedTools, item(m.CallID, "", m.Tool, m.Args))
		}
		if l := st.pendingList(m.RequestType); l != nil {
			*l = upsert(*l, it)
		}
	case protocol.ServerRequestResolved:
		if l := st.pendingList(m.RequestType); l != nil {
			*l = removeID(*l, m.RequestID)
		}
		drop := false
		switch m.RequestType {
		case protocol.RequestApproval:
			drop = m.Resolution != protocol.ResolutionApproved
		case protocol.RequestClientTool:
			drop = m.Resolution == protocol.ResolutionCancelled
		case protocol.RequestUserInput:
			drop = m.Resolution != protocol.ResolutionAnswered
		}
		if drop {
			s.TrackedTools = removeCall(s.TrackedTools, m.CallID)
		}
	case protocol.UtilityCommandStarted:
		s.ActiveUtilityCommands = slices.DeleteFunc(s.ActiveUtilityCommands, func(c protocol.ActiveUtilityCommand) bool { return c.CommandID == m.CommandID })
		s.ActiveUtilityCommands = append(s.ActiveUtilityCommands, protocol.ActiveUtilityCommand{
			CommandID: m.CommandID, Command: m.Command, Cwd: m.Cwd, ShellMode: m.ShellMode, TerminalMode: m.TerminalMode,
			PID: m.PID, Columns: m.Columns, Rows: m.Rows, OwnerConnectionID: m.OwnerConnectionID,
		})
		st.cmdOut[m.CommandID] = &tailBuffer{}
	case protocol.UtilityCommandResized:
		for i := range s.ActiveUtilityCommands {
			if c := &s.ActiveUtilityCommands[i]; c.CommandID == m.CommandID {
				cols, rows := m.Columns, m.Rows
				c.Columns, c.Rows = &cols, &rows
			}
		}
	case protocol.UtilityCommandOutput:
		if b := st.cmdOut[m.CommandID]; b != nil {
			b.add(m.Content)
		}
	case protocol.UtilityCommandExited:
		s.ActiveUtilityCommands = slices.DeleteFunc(s.ActiveUtilityCommands, func(c protocol.ActiveUtilityCommand) bool { return c.CommandID == m.CommandID })
		delete(st.cmdOut, m.CommandID)
	case protocol.UtilityFileWatchStarted:
		s.ActiveFileWatches = slices.DeleteFunc(s.ActiveFileWatches, func(w protocol.ActiveFileWatch) bool { return w.WatchID == m.WatchID })
		s.ActiveFileWatches = append(s.ActiveFileWatches, protocol.ActiveFileWatch(m))
	case protocol.UtilityFileWatchStopped:
		s.ActiveFileWatches = slices.DeleteFunc(s.ActiveFileWatches, func(w protocol.ActiveFileWatch) bool { return w.WatchID == m.WatchID })
	case protocol.Error:
		s.LastError, s.LastErrorType = m.Message, m.ErrorType
	case protocol.Status:
		s.LastStatus = m.Message
	}
}

// applyClient folds the client messages that change the state.
func (st *state) applyClient(m protocol.Message) {
	s := &st.s
	switch m.(type) {
	case protocol.Prompt:
		s.CurrentResponse = nil
		s.LastError, s.LastErrorType, s.LastStatus = "", "", ""
		s.IsResponding = true
	case protocol.Interrupt, protocol.Cancel, protocol.Shutdown:
		s.CurrentResponse = nil
		s.PendingApprovals, s.PendingClientTools, s.PendingMCPElicitations = nil, nil, nil
		s.PendingUserInputs, s.PendingToolRetries, s.TrackedTools = nil, nil, nil
		s.ActiveTools, s.ActiveUtilityCommands, s.ActiveFileWatches = nil, nil, nil
		s.IsResponding = false
		clear(st.toolOut)
		clear(st.cmdOut)
		if _, ok := m.(protocol.Shutdown); ok {
			s.IsReady = false
		}
	}
}

// snapshot returns a deep enough copy of the state with the unified
// pending_requests list (approvals, client tools, MCP elicitations, user
// inputs, tool retries, in that order).
func (st *state) snapshot(sessionID string) protocol.RuntimeState {
	s := st.s
	s.PendingApprovals = slices.Clone(s.PendingApprovals)
	s.PendingClientTools = slices.Clone(s.PendingClientTools)
	s.PendingMCPElicitations = slices.Clone(s.PendingMCPElicitations)
	s.PendingUserInputs = slices.Clone(s.PendingUserInputs)
	s.PendingToolRetries = slices.Clone(s.PendingToolRetries)
	s.TrackedTools = slices.Clone(s.TrackedTools)
	s.ActiveTools = slices.Clone(s.ActiveTools)
	for i := range s.ActiveTools {
		if b := st.toolOut[s.ActiveTools[i].CallID]; b != nil {
			s.ActiveTools[i].Output = b.String()
		}
	}
	s.ActiveUtilityCommands = slices.Clone(s.ActiveUtilityCommands)
	for i := range s.ActiveUtilityCommands {
		if b := st.cmdOut[s.ActiveUtilityCommands[i].CommandID]; b != nil {
			s.ActiveUtilityCommands[i].Output = b.String()
		}
	}
	s.ActiveFileWatches = slices.Clone(s.ActiveFileWatches)
	if c := s.CurrentResponse; c != nil {
		cp := *c
		cp.Text, cp.Thinking = st.text.String(), st.thinking.String()
		s.CurrentResponse = &cp
	}
	s.PendingRequests = []protocol.PendingRequest{}
	for _, k := range []struct {
		kind protocol.RequestType
		list []protocol.PendingItem
	}{
		{protocol.RequestApproval, s.PendingApprovals},
		{protocol.RequestClientTool, s.PendingClientTools},
		{protocol.RequestMCPElicitation, s.PendingMCPElicitations},
		{protocol.RequestUserInput, s.PendingUserInputs},
		{protocol.RequestToolRetry, s.PendingToolRetries},
	} {
		for _, it := range k.list {
			s.PendingRequests = append(s.PendingRequests, protocol.PendingRequest{
				ID: itemID(it), Kind: k.kind, Status: "pending", Visibility: "user", SessionID: sessionID,
				ToolCallID: it.CallID, CallID: it.CallID, RequestID: it.RequestID, ToolName: it.Tool, Tool: it.Tool,
				DisplayName: it.DisplayName, SummaryLabel: it.SummaryLabel, ActionDescription: it.ActionDescription,
				Args: it.Args, Source: protocol.SourceLocal,
			})
		}
	}
	return s
}

func nullable(p *string) protocol.Nullable[string] {
	if p == nil {
		return protocol.Null[string]()
	}
	return protocol.Some(*p)
}

// tailBuffer keeps the last MaxActiveCommandOutput characters of a
// command's output. It trims only when it holds twice that many bytes, so
// appending costs amortised O(chunk).
type tailBuffer struct{ b []byte }

func (t *tailBuffer) add(s string) {
	t.b = append(t.b, s...)
	if len(t.b) > 8*protocol.MaxActiveCommandOutput {
		t.b = []byte(tail(string(t.b), protocol.MaxActiveCommandOutput))
	}
}

func (t *tailBuffer) String() string { return tail(string(t.b), protocol.MaxActiveCommandOutput) }

// tail keeps the last max characters of s.
func tail(s string, max int) string {
	if len(s) <= max || utf8.RuneCountInString(s) <= max {
		return s
	}
	r := []rune(s)
	return string(r[len(r)-max:])
}
