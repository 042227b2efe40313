package eventbus

import (
	"context"
	"errors"
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
