package cli

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestServeMaxConnections: serve bounds its open connections. With
// --max-connections 2, two job event streams take both places; the next
// request is answered 503 with Retry-After and says why (it neither hangs
// nor gets a reset), and the log says so once.
func TestServeMaxConnections(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	env := map[string]string{"MAESTRO_HOME": dataDir}
	s := serveInProcess(t, env, []string{"--data-dir", dataDir, "--workers", "0", "--max-connections", "2"})
	env["MAESTRO_SERVER"] = s.url
	if code, out, errOut := runTasksCLI(t, env, "tasks", "submit", "say ok", "--piece", "noop"); code != 0 {
		t.Fatalf("submit: exit %d\n%s\n%s", code, out, errOut)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for range 2 {
		// The connections of 'tasks submit' are idle (or answered and about
		// to be): a stream takes the place of one.
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.url+"/api/v1/jobs/1/events", nil)
		req.Header.Set("Accept", "text/event-stream")
		resp, err := (&http.Client{Transport: &http.Transport{}}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("event stream: %s (the connections of 'tasks submit' are idle: it should take the place of one)", resp.Status)
		}
	}
	for range 2 {
		resp, err := (&http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}).Get(s.url + "/healthz")
		if err != nil {
			t.Fatalf("a request past the limit: %v (want a 503 answer)", err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e struct{ Error string }
		json.Unmarshal(body, &e)
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" ||
			!strings.Contains(e.Error, "limit of 2 open connections (--max-connections)") {
			t.Fatalf("past the limit: %s Retry-After %q %s", resp.Status, resp.Header.Get("Retry-After"), body)
		}
	}
	if n := strings.Count(s.log.String(), "connection limit reached"); n != 1 {
		t.Fatalf("want one log line for the refusals, got %d:\n%s", n, s.log.String())
	}
}

// TestServeMaxConnectionsFlag: a limit that is not a positive number is a
// usage error.
func TestServeMaxConnectionsFlag(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	code, _, errOut := runTasksCLI(t, map[string]string{"MAESTRO_HOME": dataDir}, "serve", "--listen", "127.0.0.1:0", "--data-dir", dataDir, "--max-connections", "0")
	if code != 2 || !strings.Contains(errOut, "--max-connections: expected a positive number of connections, found 0") {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
}
