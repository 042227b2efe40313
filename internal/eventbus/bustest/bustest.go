// Package bustest runs an embedded NATS server with JetStream for tests
// of the event bus, and reads back what was published.
package bustest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Server is an embedded NATS server that can be stopped and started
// again on the same port and store directory.
type Server struct {
	t    testing.TB
	dir  string
	port int
	srv  *server.Server
	// user and password, when set, are the only login the server
	// accepts (RequireAuth).
	user, password string
}

// Start starts a NATS server with JetStream on a free loopback port,
// storing in a temporary directory; it is shut down when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	s := &Server{t: t, dir: t.TempDir(), port: -1}
	s.Restart()
	t.Cleanup(s.Stop)
	return s
}

// URL is the server's client URL.
func (s *Server) URL() string { return "nats://127.0.0.1:" + strconv.Itoa(s.port) }

// Stop shuts the server down (its stored streams stay).
func (s *Server) Stop() {
	if s.srv != nil {
		s.srv.Shutdown()
		s.srv.WaitForShutdown()
		s.srv = nil
	}
}

// Restart starts the server (again) on its port with its store.
func (s *Server) Restart() {
	s.t.Helper()
	srv, err := server.NewServer(s.options())
	if err != nil {
		s.t.Fatalf("start NATS: %v", err)
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		s.t.Fatal("start NATS: not ready for connections after 10s")
	}
	s.srv = srv
	if s.port == -1 {
		s.port = srv.Addr().(*net.TCPAddr).Port
	}
}

func (s *Server) options() *server.Options {
	return &server.Options{
		Host: "127.0.0.1", Port: s.port, JetStream: true, StoreDir: s.dir, NoLog: true, NoSigs: true,
		Username: s.user, Password: s.password,
	}
}

// RequireAuth makes the running server accept only clients that log in
// as user with password, from now on, as an operator's configuration
// reload does (called again: the login changes). The Server's own
// reads (Wait, Messages, ConfigureStream) log in with them.
func (s *Server) RequireAuth(user, password string) {
	s.t.Helper()
	s.user, s.password = user, password
	if err := s.srv.ReloadOptions(s.options()); err != nil {
		s.t.Fatalf("reload NATS with a login: %v", err)
	}
}

// CreateStream creates the stream MAESTRO on maestro.> (as the platform
// would).
func (s *Server) CreateStream() { s.ConfigureStream(nil) }

// ConfigureStream creates the stream MAESTRO on maestro.>, or updates
// it, with the changes set makes to its configuration (a limit).
func (s *Server) ConfigureStream(set func(*jetstream.StreamConfig)) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nc, js := s.connect()
	defer nc.Close()
	cfg := jetstream.StreamConfig{Name: "MAESTRO", Subjects: []string{"maestro.>"}}
	if set != nil {
		set(&cfg)
	}
	if _, err := js.CreateOrUpdateStream(ctx, cfg); err != nil {
		s.t.Fatalf("configure stream: %v", err)
	}
}

// StreamConfig is the configuration of the stream MAESTRO.
func (s *Server) StreamConfig() jetstream.StreamConfig {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nc, js := s.connect()
	defer nc.Close()
	st, err := js.Stream(ctx, "MAESTRO")
	if err != nil {
		s.t.Fatalf("stream MAESTRO: %v", err)
	}
	return st.CachedInfo().Config
}

func (s *Server) connect() (*nats.Conn, jetstream.JetStream) {
	s.t.Helper()
	opts := []nats.Option{nats.Timeout(5 * time.Second)}
	if s.user != "" {
		opts = append(opts, nats.UserInfo(s.user, s.password))
	}
	nc, err := nats.Connect(s.URL(), opts...)
	if err != nil {
		s.t.Fatalf("connect to NATS: %v", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		s.t.Fatalf("open JetStream: %v", err)
	}
	return nc, js
}

// Message is one stored message: its subject, its Nats-Msg-Id and the
// CloudEvent it carries.
type Message struct {
	Subject string
	MsgID   string
	Event   cloudevents.Event
}

// Messages returns every message of the stream MAESTRO in stream order
// (none when the stream does not exist). A message that is not a valid
// CloudEvent fails the test.
func (s *Server) Messages() []Message {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nc, js := s.connect()
	defer nc.Close()
	st, err := js.Stream(ctx, "MAESTRO")
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		s.t.Fatalf("open stream: %v", err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		s.t.Fatalf("stream info: %v", err)
	}
	var out []Message
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			s.t.Fatalf("get message %d: %v", seq, err)
		}
		var ev cloudevents.Event
		if err := json.Unmarshal(m.Data, &ev); err != nil {
			s.t.Fatalf("message %d is no CloudEvent: %v\n%s", seq, err, m.Data)
		}
		if err := ev.Validate(); err != nil {
			s.t.Fatalf("message %d is not a valid CloudEvent: %v\n%s", seq, err, m.Data)
		}
		out = append(out, Message{Subject: m.Subject, MsgID: m.Header.Get(jetstream.MsgIDHeader), Event: ev})
	}
	return out
}

// Wait returns the stream's messages once it holds at least n, reading
// them as they arrive through an ordered consumer; it fails the test
// after 60 s.
func (s *Server) Wait(n int) []Message {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	nc, js := s.connect()
	defer nc.Close()
	got := 0
	for got < n {
		cons, err := js.OrderedConsumer(ctx, "MAESTRO", jetstream.OrderedConsumerConfig{})
		if err != nil {
			if ctx.Err() != nil {
				s.t.Fatalf("wait for %d messages: %v", n, err)
			}
			select { // the stream is not there yet
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		got = 0
		for got < n && ctx.Err() == nil {
			batch, err := cons.Fetch(n-got, jetstream.FetchMaxWait(time.Second))
			if err != nil {
				break
			}
			for range batch.Messages() {
				got++
			}
		}
		if ctx.Err() != nil {
			s.t.Fatalf("the stream holds %d messages after 60s, expected at least %d", got, n)
		}
	}
	return s.Messages()
}

// CheckOnceInOrder fails the test when an event id appears twice or when
// the tool_call.attempted events do not name the calls
// fmt.Sprintf(callFormat, 1), (…, 2), … in that order.
func CheckOnceInOrder(t testing.TB, msgs []Message, callFormat string) {
	t.Helper()
	seen := map[string]bool{}
	next := 1
	for i, m := range msgs {
		if seen[m.Event.ID()] {
			t.Errorf("event %s published twice", m.Event.ID())
		}
		seen[m.Event.ID()] = true
		if m.Event.Type() != "maestro.events.tool_call.attempted" {
			continue
		}
		var d struct {
			ID string `json:"tool_call_id"`
		}
		json.Unmarshal(m.Event.Data(), &d)
		if want := fmt.Sprintf(callFormat, next); d.ID != want {
			t.Errorf("message %d: tool call %s where %s was next (out of order)", i, d.ID, want)
		}
		next++
	}
}

// WaitFor returns the stream's messages once one of them satisfies
// match, reading them as they arrive through an ordered consumer; it
// fails the test after 60 s.
func (s *Server) WaitFor(match func(Message) bool) []Message {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	nc, js := s.connect()
	defer nc.Close()
	for {
		cons, err := js.OrderedConsumer(ctx, "MAESTRO", jetstream.OrderedConsumerConfig{})
		if err != nil {
			if ctx.Err() != nil {
				s.t.Fatalf("wait for a message: %v", err)
			}
			select { // the stream is not there yet
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		for ctx.Err() == nil {
			batch, err := cons.Fetch(100, jetstream.FetchMaxWait(time.Second))
			if err != nil {
				break
			}
			for m := range batch.Messages() {
				var ev cloudevents.Event
				if json.Unmarshal(m.Data(), &ev) == nil && match(Message{Subject: m.Subject(), MsgID: m.Headers().Get(jetstream.MsgIDHeader), Event: ev}) {
					return s.Messages()
				}
			}
		}
		if ctx.Err() != nil {
			s.t.Fatal("no such message in the stream after 60s")
		}
	}
}
