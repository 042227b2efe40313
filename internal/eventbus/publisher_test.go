package eventbus

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/maestro-run/maestro/internal/eventbus/bustest"
)

// A publish while NATS cannot be reached says so, naming the server,
// whether the server was never up (Maestro started first) or went away;
// before, it failed with nats.go's "headers not supported by this server"
// (the connection had no server INFO yet), which sent users looking for
// an outdated NATS server.
func TestPublishWhileNATSIsDown(t *testing.T) {
	srv := bustest.Start(t)
	srv.CreateStream()
	url := srv.URL()
	srv.Stop()
	p, err := Connect(Settings{URL: url, Source: "maestro-test"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	check := func(when string) {
		t.Helper()
		err := p.Publish(ctx, TypeToolCallAttempted, "s.1.0", []byte(`{}`))
		if !errors.Is(err, ErrNotConnected) || !strings.Contains(err.Error(), url) || strings.Contains(err.Error(), "headers") {
			t.Errorf("%s: Publish = %v, want ErrNotConnected naming %s", when, err, url)
		}
	}
	check("never connected")

	srv.Restart()
	if err := p.PublishRetry(ctx, TypeToolCallAttempted, "s.1.0", []byte(`{}`)); err != nil {
		t.Fatalf("after NATS came up: %v", err)
	}
	down := p.nc.StatusChanged(nats.RECONNECTING, nats.DISCONNECTED)
	srv.Stop()
	select {
	case <-down:
	case <-ctx.Done():
		t.Fatal("the connection did not notice the server stopped")
	}
	check("server gone")
}

// A publish while the server refuses the credentials says so, however
// nats.go last reported it: between two attempts to reconnect it keeps
// no error (LastError nil), and the refusal is then the reconnect
// error. Before, such a publish said "the server cannot be reached
// (reconnecting: nats: Authorization Violation)", the first line a
// maestro run printed.
func TestPublishWhileTheCredentialsAreRefused(t *testing.T) {
	srv := bustest.Start(t)
	srv.CreateStream()
	srv.RequireAuth("alice", "right-pw")
	p, err := Connect(Settings{URL: srv.URL(), URLFrom: "MAESTRO_EVENT_BUS_URL", User: "alice", Password: "wrong-pw", Source: "maestro-test"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	// Every explanation while the refusal is known, until both ways of
	// knowing it were seen (or enough of them).
	var fromDial, fromLast bool
	for n := 0; n < 200 && !(fromDial && fromLast); {
		if ctx.Err() != nil {
			t.Fatalf("the refusal was not seen within 30 s (from the reconnect error %v, from LastError %v)", fromDial, fromLast)
		}
		last := p.nc.LastError()
		err := p.explain(errors.New("publish failed"))
		if !strings.Contains(err.Error(), "Authorization Violation") {
			runtime.Gosched()
			continue
		}
		n++
		if last == nil {
			fromDial = true
		} else {
			fromLast = true
		}
		if !strings.Contains(err.Error(), "refused the credentials") || !strings.Contains(err.Error(), "MAESTRO_EVENT_BUS_PASSWORD") {
			t.Fatalf("explain = %v, want the server refused the credentials (LastError %v)", err, last)
		}
	}
}
