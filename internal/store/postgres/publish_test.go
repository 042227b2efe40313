package postgres

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/maestro-run/maestro/internal/store"
)

// TestPublish: a NOTIFY payload is one topic and its payload (which may
// hold newlines), or a batch of topics with empty payloads.
func TestPublish(t *testing.T) {
	tests := []struct {
		name, msg string
		want      []store.Notification
	}{
		{"topic only", "job:7\n", []store.Notification{{Topic: "job:7"}}},
		{"topic and payload", "a\nline 1\nline 2", []store.Notification{{Topic: "a", Payload: "line 1\nline 2"}}},
		{"no newline", "jobs", []store.Notification{{Topic: "jobs"}}},
		{"batch", "\njob:1\njob:2\njob:30", []store.Notification{{Topic: "job:1"}, {Topic: "job:2"}, {Topic: "job:30"}}},
		{"empty batch", "\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hub := store.NewHub()
			defer hub.Close()
			topics := map[string]bool{"a": true, "jobs": true}
			for _, n := range tt.want {
				topics[n.Topic] = true
			}
			var subs []*store.Subscription
			for topic := range topics {
				sub, err := hub.Subscribe(t.Context(), topic)
				if err != nil {
					t.Fatal(err)
				}
				defer sub.Close()
				subs = append(subs, sub)
			}
			publish(hub, tt.msg)
			var got []store.Notification
			for _, sub := range subs {
				select {
				case n := <-sub.C():
					got = append(got, n)
				default:
				}
			}
			less := func(a, b store.Notification) bool { return a.Topic < b.Topic }
			if diff := cmp.Diff(tt.want, got, cmpopts.SortSlices(less), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("publish(%q) delivered (-want +got):\n%s", tt.msg, diff)
			}
		})
	}
}
