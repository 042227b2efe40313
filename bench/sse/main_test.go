package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/maestro-run/maestro/internal/store/sqlite"
)

func TestStream(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, body string
		wantSeqs   []int64
		wantErr    string
	}{
		{
			name: "events then end",
			body: "retry: 2000\n\n" +
				"id: 1\nevent: status\ndata: {\"seq\":1,\"data\":{\"state\":\"running\"}}\n\n" +
				": keepalive\n\n" +
				"id: 2\nevent: bench\ndata: {\"seq\":2,\"data\":{\"i\":1,\"t\":100}}\n\n" +
				"id: 3\nevent: bench\ndata: {\"seq\":3,\"data\":{\"i\":2,\"t\":200}}\n\n" +
				"event: end\ndata: {}\n\n",
			wantSeqs: []int64{2, 3},
		},
		{name: "cut before end", body: "retry: 2000\n\nid: 2\nevent: bench\ndata: {\"seq\":2,\"data\":{\"t\":1}}\n\n", wantSeqs: []int64{2}, wantErr: "before event: end"},
		{name: "server error event", body: "retry: 2000\n\nevent: error\ndata: {\"error\":\"x\"}\n\n", wantErr: "server: "},
		{name: "bad data", body: "retry: 2000\n\nevent: bench\ndata: nope\n\n", wantErr: "event data"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("Accept") != "text/event-stream" {
					http.Error(w, "want SSE", http.StatusNotAcceptable)
					return
				}
				w.Header().Set("Content-Type", "text/event-stream")
				fmt.Fprint(w, tc.body)
			}))
			defer ts.Close()
			subscribed := 0
			var seqs []int64
			err := stream(ts.Client(), ts.URL, func() { subscribed++ }, func(seq, sent int64) { seqs = append(seqs, seq) })
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
			if subscribed != 1 {
				t.Errorf("subscribed called %d times, want 1", subscribed)
			}
			if fmt.Sprint(seqs) != fmt.Sprint(tc.wantSeqs) {
				t.Errorf("bench events %v, want %v", seqs, tc.wantSeqs)
			}
		})
	}
}

func TestBaseline(t *testing.T) {
	t.Parallel()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "m.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, read := range []bool{false, true} {
		s, err := baseline(t.Context(), st, 20, 5, read)
		if err != nil {
			t.Fatalf("read=%v: %v", read, err)
		}
		if s.Received != 100 || s.Expected != 100 || s.P50US < 0 || s.P99US < s.P50US || s.MaxUS < s.P99US {
			t.Errorf("read=%v: summary %+v", read, s)
		}
	}
}
