package eventbus_test

import (
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/maestro-run/maestro/internal/eventbus"
	"github.com/maestro-run/maestro/internal/eventbus/bustest"
	"github.com/maestro-run/maestro/internal/store"
	"github.com/maestro-run/maestro/internal/store/sqlite"
)

// lines is a log writer that hands each line to a channel.
type lines chan string

func (l lines) Write(p []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		select {
		case l <- line:
		default: // nobody reads so many
		}
	}
	return len(p), nil
}

// A NATS server that refuses Maestro's credentials: events smoke and a
// serve's bus say so (before: a serve said nothing until a job ran, then
// "the server cannot be reached"), name the settings that gave them and
// never show the password; the bus keeps trying, so its events go out
// once the server accepts the credentials (nats.go alone closed the
// connection for good at the second refusal, and the bus went on
// "retrying" on it).
func TestRefusedCredentials(t *testing.T) {
	ctx := t.Context()
	srv := bustest.Start(t)
	srv.CreateStream()
	srv.RequireAuth("alice", "right-pw")

	for _, tc := range []struct {
		s    eventbus.Settings
		hint string
	}{
		{eventbus.Settings{URL: srv.URL(), URLFrom: "MAESTRO_EVENT_BUS_URL", User: "alice", Password: "wrong-pw", Source: "maestro-test"},
			"MAESTRO_EVENT_BUS_PASSWORD"},
		{eventbus.Settings{URL: strings.Replace(srv.URL(), "nats://", "nats://alice:wrong-pw@", 1), URLFrom: "NATS_URL", Source: "maestro-test"},
			"credentials in NATS_URL"},
		{eventbus.Settings{URL: srv.URL(), URLFrom: "MAESTRO_EVENT_BUS_URL", Source: "maestro-test"},
			"none were given: set MAESTRO_EVENT_BUS_TOKEN"},
	} {
		_, err := eventbus.Smoke(ctx, tc.s, eventbus.Correlation{}, 10*time.Second)
		if err == nil || !strings.Contains(err.Error(), "refused the credentials") || !strings.Contains(err.Error(), tc.hint) ||
			strings.Contains(err.Error(), "wrong-pw") {
			t.Errorf("events smoke: %v, want the server refused the credentials, %q, no password", err, tc.hint)
		}
	}

	logs := make(lines, 100)
	b, err := eventbus.Open(eventbus.Options{
		Settings: eventbus.Settings{URL: srv.URL(), URLFrom: "MAESTRO_EVENT_BUS_URL", User: "alice", Password: "wrong-pw",
			CreateStream: true, Source: "maestro-test"},
		Logger: slog.New(slog.NewTextHandler(logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	timeout := time.After(30 * time.Second)
	for said := false; !said; {
		select {
		case line := <-logs:
			t.Log(line)
			if strings.Contains(line, "wrong-pw") {
				t.Errorf("the log shows the password: %s", line)
			}
			said = strings.Contains(line, "not connected") && strings.Contains(line, "refused the credentials") &&
				strings.Contains(line, "MAESTRO_EVENT_BUS_USER and MAESTRO_EVENT_BUS_PASSWORD")
		case <-timeout:
			t.Fatal("the bus did not say within 30s that the server refused its credentials")
		}
	}

	// The operator gives alice the password Maestro has: the job's
	// events go out, without a restart.
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "maestro.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	_, job, err := st.CreateTask(ctx, store.NewTask{Owner: "alice", Title: "t", Piece: "noop"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Cancel(ctx, job.ID, "not needed"); err != nil {
		t.Fatal(err)
	}
	go b.FollowJobs(ctx, st, filepath.Join(t.TempDir(), "jobs.json"), time.Hour)
	srv.RequireAuth("alice", "wrong-pw")
	if got := types(srv.Wait(2)); strings.Join(got, " ") != eventbus.TypeJobQueued+" "+eventbus.TypeJobCancelled {
		t.Errorf("published %q", got)
	}
}

// Messages and the smoke's output never show the credentials a URL
// carries.
func TestSettingsRedacted(t *testing.T) {
	for in, want := range map[string]string{
		"nats://127.0.0.1:4222":                   "nats://127.0.0.1:4222",
		"nats://alice:s3cret@127.0.0.1:4222":      "nats://alice:xxxxx@127.0.0.1:4222",
		"nats://t0ken@127.0.0.1:4222":             "nats://xxxxx@127.0.0.1:4222",
		"nats://a:p1@h1:4222,nats://a:p2@h2:4222": "nats://a:xxxxx@h1:4222,nats://a:xxxxx@h2:4222",
		"127.0.0.1:4222":                          "127.0.0.1:4222",
		"nats://alice:s3cret%zz@127.0.0.1:4222":   "(a URL with credentials that does not parse)",
	} {
		if got := (eventbus.Settings{URL: in}).Redacted(); got != want {
			t.Errorf("Redacted(%s) = %s, want %s", in, got, want)
		}
	}
}

// A source that is no URI reference (MAESTRO_EVENT_BUS_SOURCE=bad%zz)
// is refused when the bus opens, naming the variable: before, the bus
// opened and skipped every event for good, one error line each, since
// none could be encoded.
func TestBadSourceRefusedAtOpen(t *testing.T) {
	srv := bustest.Start(t)
	s := eventbus.Settings{URL: srv.URL(), CreateStream: true, Source: "bad%zz"}
	b, err := eventbus.Open(eventbus.Options{Settings: s})
	if err == nil {
		b.Close()
		t.Fatal("Open with source bad%zz: no error")
	}
	if !strings.Contains(err.Error(), "MAESTRO_EVENT_BUS_SOURCE") {
		t.Errorf("Open: %v, want it to name MAESTRO_EVENT_BUS_SOURCE", err)
	}
	if _, err := eventbus.Smoke(t.Context(), s, eventbus.Correlation{}, 10*time.Second); err == nil ||
		!strings.Contains(err.Error(), "MAESTRO_EVENT_BUS_SOURCE") {
		t.Errorf("Smoke: %v, want it to name MAESTRO_EVENT_BUS_SOURCE", err)
	}
}

// --event-bus-create-stream creates the stream when there is none, and
// leaves the platform's own stream as it is: before, it updated it to
// Maestro's settings, dropping the platform's limits (age, count), its
// duplicate window and its description.
func TestCreateStreamKeepsAnExistingStream(t *testing.T) {
	srv := bustest.Start(t)
	srv.ConfigureStream(func(c *jetstream.StreamConfig) {
		c.Description, c.MaxAge, c.MaxMsgs, c.Duplicates = "platform-owned", 24*time.Hour, 5000, 2*time.Minute
	})
	s := eventbus.Settings{URL: srv.URL(), CreateStream: true, Source: "maestro-test"}
	if _, err := eventbus.Smoke(t.Context(), s, eventbus.Correlation{}, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	c := srv.StreamConfig()
	if c.Description != "platform-owned" || c.MaxAge != 24*time.Hour || c.MaxMsgs != 5000 || c.Duplicates != 2*time.Minute {
		t.Errorf("the platform's stream was changed: description %q, max age %s, max msgs %d, duplicates %s",
			c.Description, c.MaxAge, c.MaxMsgs, c.Duplicates)
	}
	if n := len(srv.Messages()); n != 1 {
		t.Errorf("%d messages, want the smoke's one", n)
	}
}

// A NATS server started without JetStream (nats-server without -js, the
// usual first try): events smoke says so, with and without
// --event-bus-create-stream, and so does a bus as soon as it connects
// (serve, worker), before it has anything to publish. Before, the smoke
// said "no JetStream stream takes the subject (create it, or pass
// --event-bus-create-stream)", and with the flag "create stream MAESTRO
// on maestro.>: nats: no responders available for request"; a serve said
// nothing until its first job.
func TestServerWithoutJetStream(t *testing.T) {
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	t.Cleanup(srv.Shutdown)
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("NATS not ready for connections after 10s")
	}
	for _, create := range []bool{false, true} {
		s := eventbus.Settings{URL: srv.ClientURL(), CreateStream: create, Source: "maestro-test"}
		_, err := eventbus.Smoke(t.Context(), s, eventbus.Correlation{}, 10*time.Second)
		if !errors.Is(err, eventbus.ErrNoJetStream) || !strings.Contains(err.Error(), "-js") {
			t.Errorf("events smoke (create stream %v): %v, want the server has no JetStream", create, err)
		}
		waitLogLine(t, eventbus.Settings{URL: srv.ClientURL(), CreateStream: create, Source: "maestro-test"},
			"the server cannot store the events", "no JetStream for this account")
	}
}

// waitLogLine opens a bus with s and waits (10 s at most) for a line of
// its log that has every one of want.
func waitLogLine(t *testing.T, s eventbus.Settings, want ...string) {
	t.Helper()
	logs := make(lines, 100)
	b, err := eventbus.Open(eventbus.Options{Settings: s, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	timeout := time.After(10 * time.Second) // said as it connects
	for {
		select {
		case line := <-logs:
			said := true
			for _, w := range want {
				said = said && strings.Contains(line, w)
			}
			if said {
				return
			}
		case <-timeout:
			t.Fatalf("the bus did not log %q within 10s", want)
		}
	}
}

// A bus connected to a server where no stream takes its subjects (and
// not asked to create one) says so as it connects, naming the subject.
// Before, a serve or worker said nothing until its first job.
func TestNoStreamSaidAtConnect(t *testing.T) {
	srv := bustest.Start(t)
	waitLogLine(t, eventbus.Settings{URL: srv.URL(), Source: "maestro-test"},
		"the server cannot store the events", "maestro.sessions.session.started: no JetStream stream takes the subject")
}
