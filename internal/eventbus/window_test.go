package eventbus

import (
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// Events are sent ahead of their predecessors' acknowledgements only to a
// stream that can refuse one message for nothing but its size.
func TestLimitsOf(t *testing.T) {
	const payload = 1 << 20
	for _, c := range []struct {
		name     string
		cfg      jetstream.StreamConfig
		pipeline bool
		maxSize  int
	}{
		{"default", jetstream.StreamConfig{Subjects: []string{"maestro.>"}, Replicas: 1}, true, payload},
		{"max_msg_size", jetstream.StreamConfig{Subjects: []string{"maestro.>"}, MaxMsgSize: 2048}, true, 2048},
		{"discard old at a limit", jetstream.StreamConfig{Subjects: []string{">"}, MaxMsgs: 10}, true, payload},
		{"discard new at a limit", jetstream.StreamConfig{Subjects: []string{"maestro.>"}, Discard: jetstream.DiscardNew, MaxBytes: 1 << 30}, false, payload},
		{"discard new per subject", jetstream.StreamConfig{Subjects: []string{"maestro.>"}, Discard: jetstream.DiscardNew, MaxMsgsPerSubject: 5}, false, payload},
		{"replicated", jetstream.StreamConfig{Subjects: []string{"maestro.>"}, Replicas: 3}, false, payload},
		{"sealed", jetstream.StreamConfig{Subjects: []string{"maestro.>"}, Sealed: true}, false, payload},
		{"part of the catalogue", jetstream.StreamConfig{Subjects: []string{"maestro.sessions.>", "maestro.events.>"}}, false, payload},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := limitsOf(c.cfg, payload)
			if got.pipeline != c.pipeline || got.maxSize != c.maxSize {
				t.Errorf("limitsOf = %+v, want pipeline %v maxSize %d", got, c.pipeline, c.maxSize)
			}
		})
	}
}
