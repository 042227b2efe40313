package server

import (
	"bytes"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// failingWriter takes the status line, then fails every write, as a
// connection cut by the write idle time does.
type failingWriter struct{ *httptest.ResponseRecorder }

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("i/o timeout") }

// TestRequestLogSaysAnAnswerWasCut: the request log said status=200 for a
// download cut halfway (a client that stopped reading); it says so.
func TestRequestLogSaysAnAnswerWasCut(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		w    http.ResponseWriter
		want string
	}{
		{"whole", httptest.NewRecorder(), "status=200 "},
		{"cut", failingWriter{httptest.NewRecorder()}, `status=200 duration=`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var buf bytes.Buffer
			s := &Server{log: slog.New(slog.NewTextHandler(&buf, nil))}
			h := s.logRequests(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("data")) }))
			h.ServeHTTP(tc.w, httptest.NewRequest("GET", "/api/v1/tasks/1/deliverables/a.bin", nil))
			line := buf.String()
			cut := strings.Contains(line, `cut="i/o timeout"`)
			if !strings.Contains(line, tc.want) || cut != (tc.name == "cut") {
				t.Errorf("log line %q: want %q, and cut=\"i/o timeout\" only when the write failed", line, tc.want)
			}
		})
	}
}
