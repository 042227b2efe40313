package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/maestro-run/maestro/internal/store"
)

func TestHubDelivers(t *testing.T) {
	t.Parallel()
	h := store.NewHub()
	defer h.Close()
	a, err := h.Subscribe(t.Context(), "a")
	if err != nil {
		t.Fatal(err)
	}
	a2, _ := h.Subscribe(t.Context(), "a")
	b, _ := h.Subscribe(t.Context(), "b")
	h.Publish(store.Notification{Topic: "a", Payload: "1"})
	for _, s := range []*store.Subscription{a, a2} {
		if n := <-s.C(); n.Payload != "1" {
			t.Errorf("got %+v", n)
		}
	}
	select {
	case n := <-b.C():
		t.Fatalf("topic b received %+v published on a", n)
	default:
	}
}

func TestHubDropsWhenFull(t *testing.T) {
	t.Parallel()
	h := store.NewHub()
	defer h.Close()
	s, _ := h.Subscribe(t.Context(), "x")
	for range 1000 {
		h.Publish(store.Notification{Topic: "x"}) // never blocks
	}
	n := 0
	for len(s.C()) > 0 {
		<-s.C()
		n++
	}
	if n == 0 || n >= 1000 {
		t.Fatalf("buffered %d notifications, want some but not all", n)
	}
}

func TestHubResyncAndClose(t *testing.T) {
	t.Parallel()
	h := store.NewHub()
	a, _ := h.Subscribe(t.Context(), "a")
	b, _ := h.Subscribe(t.Context(), "b")
	h.Resync()
	if n := <-a.C(); n != (store.Notification{Topic: "a"}) {
		t.Errorf("resync on a = %+v", n)
	}
	if n := <-b.C(); n != (store.Notification{Topic: "b"}) {
		t.Errorf("resync on b = %+v", n)
	}
	a.Close()
	a.Close() // idempotent
	if _, ok := <-a.C(); ok {
		t.Error("channel open after Close")
	}
	h.Close()
	if _, ok := <-b.C(); ok {
		t.Error("channel open after the hub closed")
	}
	b.Close() // after the hub closed it: harmless
	if _, err := h.Subscribe(t.Context(), "c"); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Subscribe on a closed hub = %v, want ErrClosed", err)
	}
	h.Publish(store.Notification{Topic: "b"}) // no panic on closed subscriptions
}

func TestHubContextEndsSubscription(t *testing.T) {
	t.Parallel()
	h := store.NewHub()
	defer h.Close()
	ctx, cancel := context.WithCancel(t.Context())
	s, _ := h.Subscribe(ctx, "a")
	cancel()
	for range s.C() {
	}
	if _, err := h.Subscribe(t.Context(), "bad\ntopic"); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("Subscribe with a newline = %v, want ErrInvalid", err)
	}
}
