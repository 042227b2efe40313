package eventbus_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/eventbus"
	"github.com/maestro-run/maestro/internal/eventbus/bustest"
	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/session"
)

// newBus opens a bus on srv for a test; it is closed when the test ends.
// followNewSession creates a session in a temporary store and follows it
// with b.
func followNewSession(t *testing.T, b *eventbus.Bus) (*session.Session, *eventbus.Follower) {
	t.Helper()
	s, err := session.NewStore(t.TempDir()).Create(session.Meta{})
	if err != nil {
		t.Fatal(err)
	}
	return s, b.FollowSession(s.Dir(), s.Meta())
}

func newBus(t *testing.T, srv *bustest.Server, env eventbus.Correlation, create bool) *eventbus.Bus {
	t.Helper()
	b, err := eventbus.Open(eventbus.Options{
		Settings: eventbus.Settings{URL: srv.URL(), CreateStream: create, Source: "maestro-test"},
		Env:      env,
		Logger:   slog.New(slog.NewTextHandler(t.Output(), nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func ptr[T any](v T) *T { return &v }

// toolTurn appends one tool call's events: call, start, end.
func toolTurn(s *session.Session, id, tool string, success bool, code string) {
	s.Event(protocol.ToolCall{CallID: id, Tool: tool, Args: json.RawMessage(`{}`)})
	s.Event(protocol.ToolStart{CallID: id})
	s.Event(protocol.ToolEnd{CallID: id, Success: success, ErrorCode: code})
}

func types(msgs []bustest.Message) []string {
	var out []string
	for _, m := range msgs {
		if m.Subject != m.Event.Type() {
			out = append(out, "subject "+m.Subject+" != type "+m.Event.Type())
		}
		out = append(out, m.Event.Type())
	}
	return out
}

func TestSessionLogBecomesPlatformEvents(t *testing.T) {
	srv := bustest.Start(t)
	env := eventbus.Correlation{OrganizationID: "org_1", UserID: "user_1", WorkspaceID: "ws_1",
		AgentRunID: "run_1", AgentRunStepID: "step_1", Surface: "cli", Attributes: map[string]string{"team": "a"}}
	b := newBus(t, srv, env, true)
	store := session.NewStore(t.TempDir())
	s, err := store.Create(session.Meta{Provider: "replay", Model: "demo", ExecutorType: protocol.ExecutorReplay})
	if err != nil {
		t.Fatal(err)
	}
	f := b.FollowSession(s.Dir(), s.Meta())
	s.Event(protocol.Ready{ProtocolVersion: "2026-04-02", Model: "demo", Provider: "replay", SessionID: ptr(s.ID()), ExecutorType: protocol.ExecutorReplay})
	s.Event(protocol.ResponseStart{ResponseID: "r1"})
	toolTurn(s, "c1", "Read", true, "")
	s.Event(protocol.ServerRequest{RequestID: "q1", RequestType: protocol.RequestApproval, CallID: "c2", Tool: "Bash", Args: json.RawMessage(`{}`), Reason: "approval"})
	toolTurn(s, "c2", "Bash", false, "sandbox_violation")
	toolTurn(s, "c3", "Write", false, "denied")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close(s.Cursor(), "completed")

	want := []string{
		eventbus.TypeSessionStarted,
		eventbus.TypeToolCallAttempted, eventbus.TypeToolCallCompleted,
		eventbus.TypeApprovalHit,
		eventbus.TypeToolCallAttempted, eventbus.TypeToolCallCompleted, eventbus.TypeSandboxViolation,
		eventbus.TypeToolCallAttempted, eventbus.TypeToolCallCompleted,
		eventbus.TypeSessionClosed,
	}
	msgs := srv.Wait(len(want))
	if got := types(msgs); !slices.Equal(got, want) {
		t.Fatalf("published types:\n got %q\nwant %q", got, want)
	}
	for _, m := range msgs {
		ev := m.Event
		if m.MsgID != ev.ID() {
			t.Errorf("%s: Nats-Msg-Id %q, event id %q", ev.Type(), m.MsgID, ev.ID())
		}
		if ev.Source() != "maestro-test" || ev.Subject() != ev.Type() || ev.DataContentType() != "application/json" {
			t.Errorf("%s: source %q subject %q datacontenttype %q", ev.Type(), ev.Source(), ev.Subject(), ev.DataContentType())
		}
		ext := ev.Extensions()
		for k, v := range map[string]string{"organizationid": "org_1", "userid": "user_1", "workspaceid": "ws_1",
			"maestrosessionid": s.ID(), "agentrunid": "run_1", "agentrunstepid": "step_1", "surface": "cli"} {
			if fmt.Sprint(ext[k]) != v {
				t.Errorf("%s: extension %s = %v, want %q", ev.Type(), k, ext[k], v)
			}
		}
		var data struct {
			Type        string         `json:"@type"`
			Correlation map[string]any `json:"correlation"`
			ToolName    string         `json:"tool_name"`
			Status      string         `json:"status"`
		}
		if err := json.Unmarshal(ev.Data(), &data); err != nil {
			t.Fatalf("%s: data: %v", ev.Type(), err)
		}
		if data.Type == "" || ev.DataSchema() == "" {
			t.Errorf("%s: no @type or dataschema", ev.Type())
		}
		if data.Correlation["organization_id"] != "org_1" || data.Correlation["session_id"] != s.ID() ||
			fmt.Sprint(data.Correlation["attributes"]) != "map[team:a]" {
			t.Errorf("%s: correlation %v", ev.Type(), data.Correlation)
		}
		if ev.Type() == eventbus.TypeToolCallCompleted && data.ToolName == "" {
			t.Errorf("tool_call.completed without tool_name: %s", ev.Data())
		}
	}
	var statuses []string
	for _, m := range msgs {
		if m.Event.Type() == eventbus.TypeToolCallCompleted {
			var d struct{ Status string }
			json.Unmarshal(m.Event.Data(), &d)
			statuses = append(statuses, d.Status)
		}
	}
	if want := []string{"MAESTRO_TOOL_CALL_STATUS_SUCCEEDED", "MAESTRO_TOOL_CALL_STATUS_FAILED", "MAESTRO_TOOL_CALL_STATUS_DENIED"}; !slices.Equal(statuses, want) {
		t.Errorf("statuses %q, want %q", statuses, want)
	}
}

// NATS stopped mid-run and started again: every event arrives exactly
// once, in the log's order; the agent's appends never wait for it.
func TestNATSRestartLosesNothing(t *testing.T) {
	srv := bustest.Start(t)
	srv.CreateStream()
	b := newBus(t, srv, eventbus.Correlation{}, false)
	store := session.NewStore(t.TempDir())
	s, err := store.Create(session.Meta{Provider: "replay", Model: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	f := b.FollowSession(s.Dir(), s.Meta())
	s.Event(protocol.Ready{ProtocolVersion: "2026-04-02", SessionID: ptr(s.ID())})
	const perPhase = 40
	call := 0
	phase := func() {
		for range perPhase {
			call++
			toolTurn(s, fmt.Sprintf("c%d", call), "Read", true, "")
		}
	}
	phase()
	srv.Wait(1 + 2*perPhase)
	srv.Stop()
	phase() // appended while NATS is down
	srv.Restart()
	phase()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close(s.Cursor(), "completed")
	want := 1 + 2*3*perPhase + 1
	msgs := srv.Wait(want)
	if len(msgs) != want {
		t.Fatalf("%d messages, want %d", len(msgs), want)
	}
	bustest.CheckOnceInOrder(t, msgs, "c%d")
}

// CatchUp publishes what a process that died left in a followed
// session's log, including a pending closed event, and nothing of a
// session never followed.
func TestCatchUpPublishesLeftovers(t *testing.T) {
	srv := bustest.Start(t)
	srv.CreateStream()
	dir := t.TempDir()
	store := session.NewStore(dir)
	followed, err := store.Create(session.Meta{})
	if err != nil {
		t.Fatal(err)
	}
	never, err := store.Create(session.Meta{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*session.Session{followed, never} {
		s.Event(protocol.Ready{ProtocolVersion: "2026-04-02", SessionID: ptr(s.ID())})
		toolTurn(s, "c1", "Read", true, "")
		toolTurn(s, "c2", "Read", true, "")
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// A process followed it, published nothing and died after recording
	// the close.
	os.WriteFile(filepath.Join(followed.Dir(), "eventbus.json"), []byte(`{"cursor":0,"offset":0}`), 0o600)
	os.WriteFile(filepath.Join(followed.Dir(), "eventbus-close.json"), []byte(fmt.Sprintf(`{"cursor":%d,"reason":"completed"}`, followed.Cursor())), 0o600)
	b := newBus(t, srv, eventbus.Correlation{}, false)
	if err := b.CatchUp(t.Context(), dir); err != nil {
		t.Fatal(err)
	}
	msgs := srv.Wait(6)
	want := []string{eventbus.TypeSessionStarted, eventbus.TypeToolCallAttempted, eventbus.TypeToolCallCompleted,
		eventbus.TypeToolCallAttempted, eventbus.TypeToolCallCompleted, eventbus.TypeSessionClosed}
	if got := types(msgs); !slices.Equal(got, want) {
		t.Fatalf("published types:\n got %q\nwant %q", got, want)
	}
	for _, m := range msgs {
		if got := m.Event.Extensions()["maestrosessionid"]; got != followed.ID() {
			t.Errorf("%s of session %v", m.Event.Type(), got)
		}
	}
	// Again: nothing left.
	if err := b.CatchUp(t.Context(), dir); err != nil {
		t.Fatal(err)
	}
	if n := len(srv.Messages()); n != 6 {
		t.Errorf("%d messages after a second catch-up, want 6", n)
	}
	if _, err := os.Stat(filepath.Join(followed.Dir(), "eventbus-close.json")); err == nil {
		t.Error("the close mark is still there")
	}
}

// Records longer than the follower's read buffer (64 KiB), some longer
// than the copy it keeps between two long ones (1 MiB), are published
// like short ones, in order, whole.
func TestLongRecordsArePublished(t *testing.T) {
	srv := bustest.Start(t)
	b := newBus(t, srv, eventbus.Correlation{}, true)
	s, f := followNewSession(t, b)
	var want []string
	for i, size := range []int{10, 200 << 10, 10, 3 << 20, 100 << 10, 10} {
		id := fmt.Sprintf("c%d", i)
		args, _ := json.Marshal(map[string]string{"text": strings.Repeat("x", size)})
		s.Event(protocol.ToolCall{CallID: id, Tool: "Write" + strconv.Itoa(i), Args: args})
		s.Event(protocol.ToolEnd{CallID: id, Success: true})
		want = append(want, eventbus.TypeToolCallAttempted+" "+id+" Write"+strconv.Itoa(i), eventbus.TypeToolCallCompleted+" "+id+" Write"+strconv.Itoa(i))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close(s.Cursor(), "completed")
	want = append(want, eventbus.TypeSessionClosed+"  ")
	var got []string
	for _, m := range srv.Wait(len(want)) {
		var d struct {
			ID   string `json:"tool_call_id"`
			Tool string `json:"tool_name"`
		}
		if err := json.Unmarshal(m.Event.Data(), &d); err != nil {
			t.Fatalf("%s: data: %v", m.Event.Type(), err)
		}
		got = append(got, m.Event.Type()+" "+d.ID+" "+d.Tool)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("published:\n got %q\nwant %q", got, want)
	}
}

// A session closed while NATS is down, by a process that ended before
// NATS came back: its closed event, published by the next process, says
// when the session closed, not when it was published (a consumer
// computes durations from it).
func TestClosedEventTimeIsTheClose(t *testing.T) {
	srv := bustest.Start(t)
	srv.CreateStream()
	b, err := eventbus.Open(eventbus.Options{
		Settings:  eventbus.Settings{URL: srv.URL(), Source: "maestro-test"},
		Logger:    slog.New(slog.NewTextHandler(t.Output(), nil)),
		CloseWait: time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	s, err := session.NewStore(dir).Create(session.Meta{Provider: "replay", Model: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	f := b.FollowSession(s.Dir(), s.Meta())
	s.Event(protocol.Ready{ProtocolVersion: "2026-04-02", SessionID: ptr(s.ID())})
	srv.Wait(1)
	srv.Stop()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close(s.Cursor(), "completed")
	closedBy := time.Now()
	b.Close() // the process ends
	srv.Restart()
	if err := newBus(t, srv, eventbus.Correlation{}, false).CatchUp(t.Context(), dir); err != nil {
		t.Fatal(err)
	}
	msgs := srv.Wait(2)
	if ev := msgs[1].Event; ev.Type() != eventbus.TypeSessionClosed || ev.Time().After(closedBy) {
		t.Errorf("%s at %s, want the session's close, before %s (the next process published it)", ev.Type(), ev.Time(), closedBy)
	}
}

// crash ends s as a SIGKILLed process does: the kernel releases the
// log's lock, but neither the metadata (Session.Close) nor a close mark
// (Follower.Close) is written.
func crash(t *testing.T, s *session.Session) {
	t.Helper()
	meta, err := os.ReadFile(filepath.Join(s.Dir(), "session.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.Dir(), "session.json"), meta, 0o600); err != nil {
		t.Fatal(err)
	}
}

// closeReason is a closed event's close_reason.
func closeReason(t *testing.T, m bustest.Message) string {
	t.Helper()
	var d struct {
		Reason string `json:"close_reason"`
	}
	if err := json.Unmarshal(m.Event.Data(), &d); err != nil {
		t.Fatal(err)
	}
	return d.Reason
}

// A session whose process died (SIGKILL) is closed on the bus by the
// next process, with close_reason ERROR, at its last record and that
// record's time, its tool call in flight ended CANCELLED first, once: by the next process that catches up, or by the
// process that resumes it, first; a resume then publishes resumed and
// its own closed. A session a process without the bus closed cleanly is
// closed COMPLETED.
func TestKilledSessionIsClosedByTheNextProcess(t *testing.T) {
	for _, tc := range []struct {
		name    string
		catchUp bool // the next process catches up before the resume
		clean   bool // the process closed the session, without the bus
		reason  string
	}{
		{"catch-up", true, false, "MAESTRO_CLOSE_REASON_ERROR"},
		{"resume", false, false, "MAESTRO_CLOSE_REASON_ERROR"},
		{"closed-without-bus", true, true, "MAESTRO_CLOSE_REASON_COMPLETED"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := bustest.Start(t)
			srv.CreateStream()
			dir := t.TempDir()
			store := session.NewStore(dir)
			s, err := store.Create(session.Meta{Provider: "replay", Model: "demo"})
			if err != nil {
				t.Fatal(err)
			}
			b := newBus(t, srv, eventbus.Correlation{}, false)
			b.FollowSession(s.Dir(), s.Meta())
			s.Event(protocol.Ready{ProtocolVersion: "2026-04-02", SessionID: ptr(s.ID())})
			toolTurn(s, "c1", "Read", true, "")
			s.Event(protocol.ToolCall{CallID: "c2", Tool: "Bash", Args: json.RawMessage(`{}`)}) // in flight
			srv.Wait(4)
			last := s.Cursor()
			lastTime := time.Now()
			if tc.clean {
				s.Close()
			} else {
				crash(t, s)
			}
			b.Close() // the process is gone

			next := newBus(t, srv, eventbus.Correlation{}, false)
			if tc.catchUp {
				if err := next.CatchUp(t.Context(), dir); err != nil {
					t.Fatal(err)
				}
				if err := next.CatchUp(t.Context(), dir); err != nil { // nothing twice
					t.Fatal(err)
				}
			}
			s, err = store.Open(s.ID())
			if err != nil {
				t.Fatal(err)
			}
			f := next.FollowSession(s.Dir(), s.Meta())
			s.Event(protocol.Ready{ProtocolVersion: "2026-04-02", SessionID: ptr(s.ID())})
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			f.Close(s.Cursor(), "completed")
			msgs := srv.Wait(8)
			want := []string{eventbus.TypeSessionStarted, eventbus.TypeToolCallAttempted, eventbus.TypeToolCallCompleted,
				eventbus.TypeToolCallAttempted, eventbus.TypeToolCallCompleted,
				eventbus.TypeSessionClosed, eventbus.TypeSessionResumed, eventbus.TypeSessionClosed}
			if got := types(msgs); !slices.Equal(got, want) {
				t.Fatalf("published types:\n got %q\nwant %q", got, want)
			}
			var cut struct{ ID, Tool, Status, Code string }
			var d map[string]string
			json.Unmarshal(msgs[4].Event.Data(), &d)
			cut.ID, cut.Tool, cut.Status, cut.Code = d["tool_call_id"], d["tool_name"], d["status"], d["error_code"]
			if cut.ID != "c2" || cut.Tool != "Bash" || cut.Status != "MAESTRO_TOOL_CALL_STATUS_CANCELLED" || cut.Code != "cancelled" {
				t.Errorf("the call in flight ended %+v, want c2 Bash CANCELLED cancelled", cut)
			}
			ended := msgs[5].Event
			if want := s.ID() + "." + strconv.FormatInt(last, 10) + ".closed"; ended.ID() != want {
				t.Errorf("closed event id %s, want %s (the last record of the ended run)", ended.ID(), want)
			}
			if r := closeReason(t, msgs[5]); r != tc.reason {
				t.Errorf("the ended run's close_reason %s, want %s", r, tc.reason)
			}
			if ended.Time().After(lastTime) || !ended.Time().Equal(msgs[3].Event.Time()) {
				t.Errorf("the ended run's closed at %s, want its last record's time %s", ended.Time(), msgs[3].Event.Time())
			}
			if r := closeReason(t, msgs[7]); r != "MAESTRO_CLOSE_REASON_COMPLETED" {
				t.Errorf("the resumed run's close_reason %s", r)
			}
		})
	}
}

// The reasons a session's closer gives become close_reason's enum (wire
// contract §16); before, everything but error and user_stopped was
// COMPLETED, an idle session disposed of by maestro serve included.
func TestCloseReasons(t *testing.T) {
	srv := bustest.Start(t)
	b := newBus(t, srv, eventbus.Correlation{}, true)
	reasons := map[string]string{
		"completed": "MAESTRO_CLOSE_REASON_COMPLETED", "error": "MAESTRO_CLOSE_REASON_ERROR",
		"user_stopped": "MAESTRO_CLOSE_REASON_USER_STOPPED", "idle_timeout": "MAESTRO_CLOSE_REASON_IDLE_TIMEOUT",
	}
	want := map[string]string{}
	for reason, enum := range reasons {
		s, f := followNewSession(t, b)
		s.Event(protocol.Ready{ProtocolVersion: "2026-04-02", SessionID: ptr(s.ID())})
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		f.Close(s.Cursor(), reason)
		want[s.ID()] = enum
	}
	for _, m := range srv.Wait(2 * len(reasons)) {
		if m.Event.Type() != eventbus.TypeSessionClosed {
			continue
		}
		sid, _, _ := strings.Cut(m.Event.ID(), ".")
		if got := closeReason(t, m); got != want[sid] {
			t.Errorf("closed %s, want %s", got, want[sid])
		}
	}
}

// A session followed under an id that is not its log's (a hosted runner
// publishes under its session id; a runner restored from a drain has a
// log of its own and continues the suspended session) publishes every
// event under that id, and so does the next process that closes it
// after a crash.
func TestSessionIDOnTheBusIsTheCallers(t *testing.T) {
	srv := bustest.Start(t)
	srv.CreateStream()
	dir := t.TempDir()
	s, err := session.NewStore(dir).Create(session.Meta{})
	if err != nil {
		t.Fatal(err)
	}
	s.Event(protocol.Ready{ProtocolVersion: "2026-04-02", SessionID: ptr("mrs_sess")}) // the suspended session's, imported
	b := newBus(t, srv, eventbus.Correlation{}, false)
	meta := s.Meta()
	meta.ID = "mrs_sess"
	b.FollowRestored(s.Dir(), meta, s.Cursor())
	toolTurn(s, "c1", "Read", true, "")
	srv.Wait(3) // resumed, attempted, completed
	crash(t, s)
	b.Close()
	if err := newBus(t, srv, eventbus.Correlation{}, false).CatchUp(t.Context(), dir); err != nil {
		t.Fatal(err)
	}
	msgs := srv.Wait(4)
	if got, want := types(msgs), []string{eventbus.TypeSessionResumed, eventbus.TypeToolCallAttempted, eventbus.TypeToolCallCompleted, eventbus.TypeSessionClosed}; !slices.Equal(got, want) {
		t.Fatalf("published types:\n got %q\nwant %q", got, want)
	}
	for _, m := range msgs {
		var d struct {
			SessionID string `json:"session_id"`
		}
		json.Unmarshal(m.Event.Data(), &d)
		sid, _, _ := strings.Cut(m.Event.ID(), ".")
		if sid != "mrs_sess" || m.Event.Extensions()["maestrosessionid"] != "mrs_sess" ||
			(strings.HasPrefix(m.Event.Type(), "maestro.sessions.") && d.SessionID != "mrs_sess") {
			t.Errorf("%s %s: session_id %q, extension %v; want mrs_sess", m.Event.Type(), m.Event.ID(), d.SessionID, m.Event.Extensions()["maestrosessionid"])
		}
	}
}

// A piece run's subtask has its own session log in the run directory
// (<session dir>/runs/<n>/subtasks/<NN-name>/logs/<id>/), with no ready
// record. Followed with NoReady (host.FollowSession, the piece run's
// FollowLog), it starts on the bus with its first record. When the
// process dies mid-run (SIGKILL), the process that closes the parent
// session (catching up, or resuming it) first closes the subtask too:
// its call in flight CANCELLED, closed ERROR at its last record; and
// only once. Before, the subtask never published started, and it stayed
// open on the bus for ever (no process read run directories). The
// subtask's lifecycle events name its parent session (parent_session_id;
// before, nothing in an event said which session spawned it).
func TestKilledPieceRunClosesItsSubtasks(t *testing.T) {
	for _, resume := range []bool{false, true} {
		t.Run(fmt.Sprint("resume=", resume), func(t *testing.T) {
			srv := bustest.Start(t)
			srv.CreateStream()
			dir := t.TempDir()
			store := session.NewStore(dir)
			parent, err := store.Create(session.Meta{Provider: "replay", Model: "demo"})
			if err != nil {
				t.Fatal(err)
			}
			b := newBus(t, srv, eventbus.Correlation{}, false)
			b.FollowSession(parent.Dir(), parent.Meta())
			parent.Event(protocol.Ready{ProtocolVersion: "2026-04-02", SessionID: ptr(parent.ID())})
			srv.Wait(1)
			sub, err := session.NewStore(filepath.Join(parent.Dir(), "runs", "1", "subtasks", "01-alpha", "logs")).
				Create(session.Meta{Provider: "replay", Model: "leaf", ExecutorType: protocol.ExecutorReplay})
			if err != nil {
				t.Fatal(err)
			}
			b.FollowSession(sub.Dir(), sub.Meta(), eventbus.NoReady())
			sub.Message(llm.Message{Role: llm.RoleUser, Parts: []llm.Part{{Type: llm.PartText, Text: "# Task"}}})
			toolTurn(sub, "c1", "Read", true, "")
			sub.Event(protocol.ToolCall{CallID: "c2", Tool: "Bash", Args: json.RawMessage(`{}`)}) // in flight
			live := srv.Wait(5)
			want := []string{eventbus.TypeSessionStarted, eventbus.TypeSessionStarted, eventbus.TypeToolCallAttempted,
				eventbus.TypeToolCallCompleted, eventbus.TypeToolCallAttempted}
			if got := types(live); !slices.Equal(got, want) {
				t.Fatalf("published while the run ran:\n got %q\nwant %q", got, want)
			}
			started := live[1].Event
			var d map[string]any
			json.Unmarshal(started.Data(), &d)
			if started.ID() != sub.ID()+".1.started" || d["session_id"] != sub.ID() || d["model"] != "leaf" || d["executor_type"] != "replay" ||
				d["parent_session_id"] != parent.ID() {
				t.Errorf("the subtask's started: id %s, data %v", started.ID(), d)
			}
			clear(d)
			json.Unmarshal(live[0].Event.Data(), &d)
			if p, ok := d["parent_session_id"]; ok {
				t.Errorf("the parent's started names a parent session %v", p)
			}
			crash(t, sub)
			crash(t, parent)
			b.Close() // the process is gone

			next := newBus(t, srv, eventbus.Correlation{}, false)
			if resume {
				parent, err = store.Open(parent.ID())
				if err != nil {
					t.Fatal(err)
				}
				f := next.FollowSession(parent.Dir(), parent.Meta())
				parent.Event(protocol.Ready{ProtocolVersion: "2026-04-02", SessionID: ptr(parent.ID())})
				if err := parent.Close(); err != nil {
					t.Fatal(err)
				}
				f.Close(parent.Cursor(), "completed")
			}
			for range 2 { // nothing twice
				if err := next.CatchUp(t.Context(), dir); err != nil {
					t.Fatal(err)
				}
			}
			want = []string{eventbus.TypeToolCallCompleted, eventbus.TypeSessionClosed, eventbus.TypeSessionClosed}
			if resume {
				want = append(want, eventbus.TypeSessionResumed, eventbus.TypeSessionClosed)
			}
			msgs := srv.Wait(5 + len(want))
			if got := types(msgs[5:]); !slices.Equal(got, want) {
				t.Fatalf("published by the next process:\n got %q\nwant %q", got, want)
			}
			if n := len(srv.Messages()); n != 5+len(want) {
				t.Errorf("%d events, want %d", n, 5+len(want))
			}
			clear(d)
			json.Unmarshal(msgs[5].Event.Data(), &d)
			if msgs[5].Event.ID() != sub.ID()+".5.ended.c2" || d["tool_call_id"] != "c2" || d["status"] != "MAESTRO_TOOL_CALL_STATUS_CANCELLED" {
				t.Errorf("the subtask's call in flight ended %s %v, want c2 CANCELLED", msgs[5].Event.ID(), d)
			}
			for i, id := range []string{sub.ID(), parent.ID()} {
				m := msgs[6+i]
				if got := m.Event.Extensions()["maestrosessionid"]; got != id || closeReason(t, m) != "MAESTRO_CLOSE_REASON_ERROR" {
					t.Errorf("closed %s of session %v, %s; want session %s closed ERROR", m.Event.ID(), got, closeReason(t, m), id)
				}
			}
			clear(d)
			json.Unmarshal(msgs[6].Event.Data(), &d)
			if d["parent_session_id"] != parent.ID() {
				t.Errorf("the subtask's closed (by the next process): data %v, want parent_session_id %s", d, parent.ID())
			}
		})
	}
}

// A session log with a corrupt record (a line that is not a record,
// after the publish cursor) cannot be published; the catch-up reports it
// and goes on with the other sessions. Before, it stopped at it: every
// session listed after it (older ones) stayed unpublished, at every
// start, for good.
func TestCatchUpSkipsACorruptLog(t *testing.T) {
	srv := bustest.Start(t)
	srv.CreateStream()
	dir := t.TempDir()
	store := session.NewStore(dir)
	b := newBus(t, srv, eventbus.Correlation{}, false)
	killed, err := store.Create(session.Meta{}) // the older: listed last
	if err != nil {
		t.Fatal(err)
	}
	b.FollowSession(killed.Dir(), killed.Meta())
	killed.Event(protocol.Ready{ProtocolVersion: "2026-04-02", SessionID: ptr(killed.ID())})
	srv.Wait(1)
	crash(t, killed)
	corrupt, err := store.Create(session.Meta{}) // the newer: listed first
	if err != nil {
		t.Fatal(err)
	}
	f := b.FollowSession(corrupt.Dir(), corrupt.Meta())
	corrupt.Event(protocol.Ready{ProtocolVersion: "2026-04-02", SessionID: ptr(corrupt.ID())})
	if err := corrupt.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close(corrupt.Cursor(), "completed") // started, closed
	b.Close()
	logFile, err := os.OpenFile(filepath.Join(corrupt.Dir(), "events.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	logFile.WriteString("not a record\n")
	logFile.Close()

	err = newBus(t, srv, eventbus.Correlation{}, false).CatchUp(t.Context(), dir)
	if err == nil || !strings.Contains(err.Error(), corrupt.ID()) {
		t.Errorf("catch-up error %v, want one naming the corrupt session %s", err, corrupt.ID())
	}
	msgs := srv.Messages()
	if n := len(msgs); n != 4 || msgs[3].Event.ID() != killed.ID()+".1.closed" {
		t.Fatalf("published %q, want the killed session's closed last", types(msgs))
	}
}

// A subtask that closes while NATS is down leaves its events in its log
// (its close mark), and the process may then publish its parent's
// events and end: the parent has nothing left, so no catch-up looked at
// its subtasks, and the subtask stayed unpublished, open on the bus. It
// now marks its parent, and the next catch-up publishes it: when its
// close waited (Close), or when it did not (CloseLater, a piece run's
// subtask) and its parent's close waited for it in vain.
func TestSubtaskLeftUnpublishedIsCaughtUpWithItsParent(t *testing.T) {
	for _, later := range []bool{false, true} {
		t.Run(fmt.Sprint("later=", later), func(t *testing.T) {
			srv := bustest.Start(t)
			srv.CreateStream()
			dir := t.TempDir()
			parent, err := session.NewStore(dir).Create(session.Meta{})
			if err != nil {
				t.Fatal(err)
			}
			b, err := eventbus.Open(eventbus.Options{Settings: eventbus.Settings{URL: srv.URL(), Source: "maestro-test"},
				CloseWait: 100 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			pf := b.FollowSession(parent.Dir(), parent.Meta())
			sub, err := session.NewStore(filepath.Join(parent.Dir(), "runs", "1", "subtasks", "01-alpha", "logs")).Create(session.Meta{})
			if err != nil {
				t.Fatal(err)
			}
			f := b.FollowSession(sub.Dir(), sub.Meta(), eventbus.NoReady())
			toolTurn(sub, "c1", "Read", true, "")
			srv.Wait(3) // started, attempted, completed
			srv.Stop()
			toolTurn(sub, "c2", "Read", true, "")
			if err := sub.Close(); err != nil {
				t.Fatal(err)
			}
			if later {
				f.CloseLater(sub.Cursor(), "completed")
			} else {
				f.Close(sub.Cursor(), "completed") // not published within CloseWait
			}
			if err := parent.Close(); err != nil {
				t.Fatal(err)
			}
			pf.Close(parent.Cursor(), "completed") // not published within CloseWait either
			b.Close()
			srv.Restart()
			// The parent: its events all published, closed (nothing pending).
			if err := os.Remove(filepath.Join(parent.Dir(), "eventbus-close.json")); err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
			fi, err := os.Stat(parent.LogPath())
			if err != nil {
				t.Fatal(err)
			}
			state := fmt.Sprintf(`{"cursor":%d,"offset":%d,"started":true,"closed":%d,"correlation":{}}`, parent.Cursor(), fi.Size(), parent.Cursor())
			if err := os.WriteFile(filepath.Join(parent.Dir(), "eventbus.json"), []byte(state), 0o600); err != nil {
				t.Fatal(err)
			}

			next := newBus(t, srv, eventbus.Correlation{}, false)
			for range 2 { // nothing twice
				if err := next.CatchUp(t.Context(), dir); err != nil {
					t.Fatal(err)
				}
			}
			want := []string{eventbus.TypeSessionStarted, eventbus.TypeToolCallAttempted, eventbus.TypeToolCallCompleted,
				eventbus.TypeToolCallAttempted, eventbus.TypeToolCallCompleted, eventbus.TypeSessionClosed}
			if got := types(srv.Messages()); !slices.Equal(got, want) {
				t.Fatalf("published:\n got %q\nwant %q", got, want)
			}
			if _, err := os.Stat(filepath.Join(parent.Dir(), "eventbus-subtasks")); err == nil {
				t.Error("the parent's mark is still there after its subtasks were caught up")
			}
		})
	}
}
