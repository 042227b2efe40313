package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrClosed is returned by calls on a closed store or hub.
var ErrClosed = errors.New("store closed")

// subscriptionBuffer is how many notifications a slow subscriber may have
// pending before further ones are dropped. Dropping is safe because a
// subscriber with pending notifications will wake and re-read anyway.
const subscriptionBuffer = 16

// Hub fans notifications out to in-process subscribers by topic. The SQLite
// backend publishes to it directly; the PostgreSQL backend feeds it from its
// LISTEN connection. A zero Hub is not usable; call NewHub.
type Hub struct {
	mu     sync.Mutex
	subs   map[string]map[*Subscription]struct{}
	closed bool
}

// NewHub returns an empty hub.
func NewHub() *Hub { return &Hub{subs: map[string]map[*Subscription]struct{}{}} }

// Subscription receives the notifications of one topic.
type Subscription struct {
	hub   *Hub
	topic string
	ch    chan Notification
	stop  func() bool
}

// C returns the channel notifications arrive on. It is closed when the
// subscription is closed (by Close, its context, or the store closing).
func (s *Subscription) C() <-chan Notification { return s.ch }

// Wait blocks until a notification arrives or tick fires (a nil tick
// never does), and then returns true; it returns false once ctx ends or
// the subscription is closed. Notifications carry no payload a waiter
// needs: a true return only says that it is time to read again.
func (s *Subscription) Wait(ctx context.Context, tick <-chan time.Time) bool {
	select {
	case <-ctx.Done():
		return false
	case _, ok := <-s.ch:
		return ok
	case <-tick:
		return true
	}
}

// Topic returns the subscribed topic.
func (s *Subscription) Topic() string { return s.topic }

// Close ends the subscription; it is safe to call more than once.
func (s *Subscription) Close() {
	s.stop()
	s.hub.remove(s)
}

// Subscribe registers a subscription to topic that ends when ctx ends.
func (h *Hub) Subscribe(ctx context.Context, topic string) (*Subscription, error) {
	if err := ValidateTopic(topic); err != nil {
		return nil, fmt.Errorf("subscribe to %q: %w", topic, err)
	}
	s := &Subscription{hub: h, topic: topic, ch: make(chan Notification, subscriptionBuffer)}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, fmt.Errorf("subscribe to %q: %w", topic, ErrClosed)
	}
	if h.subs[topic] == nil {
		h.subs[topic] = map[*Subscription]struct{}{}
	}
	h.subs[topic][s] = struct{}{}
	h.mu.Unlock()
	s.stop = context.AfterFunc(ctx, func() { h.remove(s) })
	return s, nil
}

func (h *Hub) remove(s *Subscription) {
	h.mu.Lock()
	defer h.mu.Unlock()
	set, ok := h.subs[s.topic]
	if !ok {
		return
	}
	if _, ok := set[s]; !ok {
		return
	}
	delete(set, s)
	if len(set) == 0 {
		delete(h.subs, s.topic)
	}
	close(s.ch)
}

// Publish delivers n to the subscribers of n.Topic without blocking; a
// subscriber whose buffer is full misses it (see Notifier).
func (h *Hub) Publish(n Notification) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs[n.Topic] {
		select {
		case s.ch <- n:
		default:
		}
	}
}

// Resync delivers an empty notification to every subscription, telling it
// to re-read: used after notifications may have been lost (a dropped
// database connection).
func (h *Hub) Resync() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for topic, set := range h.subs {
		for s := range set {
			select {
			case s.ch <- Notification{Topic: topic}:
			default:
			}
		}
	}
}

// Close ends every subscription; later Subscribe calls fail with ErrClosed.
func (h *Hub) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for topic, set := range h.subs {
		for s := range set {
			close(s.ch)
		}
		delete(h.subs, topic)
	}
}
