package cli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// An unknown subcommand of any command group is a usage error (exit 2)
// naming the group and its subcommands, not the group's help and exit 0,
// which a script takes for success; the group alone still prints its help.
func TestUnknownSubcommand(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ group, valid string }{
		{"tasks", "show"}, {"agents", "list"}, {"pieces", "validate"}, {"sessions", "show"}, {"events", "smoke"},
	} {
		t.Run(c.group, func(t *testing.T) {
			t.Parallel()
			code, out, errOut := runTasksCLI(t, map[string]string{}, c.group, "get", "12")
			if code != ExitUsage || !strings.Contains(errOut, `unknown command "get" for "maestro `+c.group+`"`) || !strings.Contains(errOut, c.valid) {
				t.Fatalf("%s get 12: exit %d, want %d naming the command and the valid ones\n%s\n%s", c.group, code, ExitUsage, out, errOut)
			}
			code, out, errOut = runTasksCLI(t, map[string]string{}, c.group)
			if code != 0 || !strings.Contains(out, "Available Commands:") {
				t.Fatalf("%s: exit %d\n%s\n%s", c.group, code, out, errOut)
			}
		})
	}
}

// fakeTaskList serves GET /api/v1/tasks over ids n..1 (newest first) with
// the server's paging (limit, before, next_before) and records the
// queries it was sent.
func fakeTaskList(t *testing.T, n int64) (*httptest.Server, func() []string) {
	var mu sync.Mutex
	var queries []string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/tasks" {
			http.NotFound(w, r)
			return
		}
		mu.Lock()
		queries = append(queries, r.URL.RawQuery)
		mu.Unlock()
		var limit, before int64
		fmt.Sscan(r.URL.Query().Get("limit"), &limit)
		fmt.Sscan(r.URL.Query().Get("before"), &before)
		if before == 0 {
			before = n + 1
		}
		var tasks []string
		last := int64(0)
		for id := before - 1; id >= 1 && int64(len(tasks)) < limit; id-- {
			tasks = append(tasks, fmt.Sprintf(`{"id":%d,"title":"task %d","created_at":"2026-11-27T10:00:00Z","updated_at":"2026-11-27T10:00:00Z"}`, id, id))
			last = id
		}
		next := ""
		if int64(len(tasks)) == limit && last > 1 {
			next = fmt.Sprintf(`,"next_before":%d`, last)
		}
		fmt.Fprintf(w, `{"tasks":[%s]%s}`, strings.Join(tasks, ","), next)
	}))
	t.Cleanup(ts.Close)
	return ts, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), queries...)
	}
}

// `tasks list` showed the newest --limit tasks and nothing else: no word
// that more matched, and no flag to see them (the API's next_before had
// no counterpart), so a team with 21 tasks saw 20 and believed it.
func TestTasksListPages(t *testing.T) {
	t.Parallel()
	ts, queries := fakeTaskList(t, 5)
	env := map[string]string{}
	code, out, errOut := runTasksCLI(t, env, "tasks", "list", "--server", ts.URL, "--token", "s3cret", "--limit", "2", "--state", "failed,queued")
	want := "more tasks: maestro tasks list --server " + ts.URL + " --state failed,queued --limit 2 --before 4"
	if code != 0 || !strings.Contains(out, "task 5") || !strings.Contains(out, "task 4") || strings.Contains(out, "task 3") ||
		!strings.Contains(errOut, want) {
		t.Fatalf("list --limit 2: exit %d, want the 2 newest and %q on stderr\n%s\n%s", code, want, out, errOut)
	}
	if strings.Contains(errOut, "s3cret") {
		t.Fatalf("the next page's command repeats the token: %s", errOut)
	}
	// The command printed shows the next page, and the last one says
	// nothing more.
	code, out, errOut = runTasksCLI(t, env, "tasks", "list", "--server", ts.URL, "--limit", "2", "--before", "4")
	if code != 0 || !strings.Contains(out, "task 3") || !strings.Contains(out, "task 2") || strings.Contains(out, "task 4") ||
		!strings.Contains(errOut, "--before 2") {
		t.Fatalf("list --before 4: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = runTasksCLI(t, env, "tasks", "list", "--server", ts.URL, "--limit", "2", "--before", "2")
	if code != 0 || !strings.Contains(out, "task 1") || errOut != "" {
		t.Fatalf("list --before 2 (the last page): exit %d, want no hint\n%s\n%s", code, out, errOut)
	}
	if q := queries(); len(q) != 3 || !strings.Contains(q[1], "before=4") {
		t.Fatalf("queries sent: %q", q)
	}
	// --json keeps the API's answer (next_before) and stdout clean.
	code, out, errOut = runTasksCLI(t, env, "tasks", "list", "--server", ts.URL, "--limit", "2", "--json")
	var list struct {
		NextBefore int64 `json:"next_before"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil || list.NextBefore != 4 {
		t.Fatalf("list --json: exit %d\n%s\n%s", code, out, errOut)
	}
	// A limit out of range is the command's usage error, not the server's.
	for _, limit := range []string{"0", "-1", "1001"} {
		code, _, errOut = runTasksCLI(t, env, "tasks", "list", "--server", ts.URL, "--limit", limit)
		if code != ExitUsage || !strings.Contains(errOut, "expected 1-1000") {
			t.Fatalf("list --limit %s: exit %d\n%s", limit, code, errOut)
		}
	}
}

// `tasks download --json` of a task with no deliverables printed nothing
// on stdout: a script reading the answer got no JSON at all.
func TestTasksDownloadJSONNothing(t *testing.T) {
	t.Parallel()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/tasks/7/deliverables" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(`{"files":[]}`))
	}))
	defer ts.Close()
	dir := filepath.Join(t.TempDir(), "out")
	code, out, errOut := runTasksCLI(t, map[string]string{}, "tasks", "download", "7", "-o", dir, "--server", ts.URL, "--json")
	var got struct {
		Dir   string            `json:"dir"`
		Files []json.RawMessage `json:"files"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &got) != nil || got.Dir != dir || got.Files == nil || len(got.Files) != 0 {
		t.Fatalf("download --json with nothing to download: exit %d, want {dir, files: []}\n%s\n%s", code, out, errOut)
	}
}

// `tasks show` did not say what holds a queued job: a task submitted with
// --profile gpu to a server whose workers serve no such profile stayed
// "queued (attempt 0/3)" with no reason given, and --priority showed
// nowhere; nor when a failed attempt's retry comes. The error of an
// earlier attempt showed as the error of a job still queued or running.
func TestTasksShowSaysWhatHoldsAJob(t *testing.T) {
	t.Parallel()
	later := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/v1/tasks/7":
			fmt.Fprintf(w, `{"task":{"id":7,"title":"render","created_at":"2026-11-27T10:00:00Z","updated_at":"2026-11-27T10:00:00Z","job_id":9,"job_state":"queued"},
"jobs":[{"id":8,"task_id":7,"priority":0,"payload":{},"state":"succeeded","attempt":1,"max_attempts":3,"scheduled_at":"2026-11-27T10:00:00Z","last_seq":3,"created_at":"2026-11-27T10:00:00Z","updated_at":"2026-11-27T10:00:00Z"},
{"id":9,"task_id":7,"profile":"gpu","task_class":"render","priority":5,"payload":{},"state":"queued","attempt":1,"max_attempts":3,"scheduled_at":%q,"error":"boom","last_seq":3,"created_at":"2026-11-27T10:00:00Z","updated_at":"2026-11-27T10:00:00Z"}],"comments":[]}`, later)
		case "/api/v1/tasks/7/deliverables":
			w.Write([]byte(`{"files":[]}`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer ts.Close()
	code, out, errOut := runTasksCLI(t, map[string]string{}, "tasks", "show", "7", "--server", ts.URL)
	if code != 0 || !strings.Contains(out, "only workers serving profile gpu and task class render run it, priority 5") ||
		!strings.Contains(out, "next attempt at ") || !strings.Contains(out, "earlier attempt: boom") || strings.Contains(out, "error: boom") {
		t.Fatalf("show: exit %d\n%s\n%s", code, out, errOut)
	}
	// A job asked for nothing of the kind gets no such line.
	if first, _, _ := strings.Cut(out, "job 9"); strings.Contains(first, "workers serving") || strings.Contains(first, "priority") {
		t.Fatalf("a plain job shows requirements:\n%s", out)
	}
}

// A deliverables listing the server cut at its limits ("truncated": true)
// was downloaded as if it were all of output/: "N file(s) in DIR", exit 0,
// the rest silently missing; `show` did not say so either.
func TestTasksDownloadTruncatedListing(t *testing.T) {
	t.Parallel()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/v1/tasks/7":
			w.Write([]byte(`{"task":{"id":7,"title":"many","created_at":"2026-11-27T10:00:00Z","updated_at":"2026-11-27T10:00:00Z"},"jobs":[],"comments":[]}`))
		case "/api/v1/tasks/7/deliverables":
			w.Write([]byte(`{"files":[{"path":"a.txt","size":2,"modified":"2026-11-27T10:00:00Z"}],"truncated":true}`))
		case "/api/v1/tasks/7/deliverables/a.txt":
			w.Write([]byte("ok"))
		default:
			http.NotFound(w, r)
		}
	}))
	defer ts.Close()
	dir := filepath.Join(t.TempDir(), "out")
	code, out, errOut := runTasksCLI(t, map[string]string{}, "tasks", "download", "7", "-o", dir, "--server", ts.URL)
	if code != ExitError || !strings.Contains(errOut, "incomplete") || !strings.Contains(out, "wrote "+filepath.Join(dir, "a.txt")) {
		t.Fatalf("download of a truncated listing: exit %d, want 1 saying it is incomplete\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = runTasksCLI(t, map[string]string{}, "tasks", "show", "7", "--server", ts.URL)
	if code != 0 || !strings.Contains(out, "and more: the server's listing of output/ stopped at its limit") {
		t.Fatalf("show of a truncated listing: exit %d\n%s\n%s", code, out, errOut)
	}
}

// `tasks submit --json -f` printed the create's answer indented over many
// lines, then the events one per line: a script reading the output line by
// line (JSON Lines, as `logs --json` is) choked on the first line.
func TestTasksSubmitJSONFollowIsJSONLines(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	env := map[string]string{"MAESTRO_HOME": dataDir}
	env["MAESTRO_SERVER"] = startServeCLI(t, env, "--data-dir", dataDir, "--workers", "1")
	code, out, errOut := runTasksCLI(t, env, "tasks", "submit", "say ok", "--piece", "noop", "--json", "-f")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) < 3 {
		t.Fatalf("submit --json -f: exit %d\n%s\n%s", code, out, errOut)
	}
	var created struct {
		Task struct{ ID int64 } `json:"task"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &created); err != nil || created.Task.ID != 1 {
		t.Fatalf("first line is not the create's answer: %v\n%s", err, out)
	}
	for i, l := range lines[1:] {
		var ev struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal([]byte(l), &ev); err != nil || ev.Type == "" {
			t.Fatalf("line %d is not an event: %v\n%s", i+2, err, out)
		}
	}
}

// `tasks list` with nothing to list printed a bare header, which reads as
// a listing that failed; it says there is none, and how to make one.
func TestTasksListEmptySaysSo(t *testing.T) {
	t.Parallel()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"tasks":[]}`))
	}))
	defer ts.Close()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, `no tasks yet; submit one with maestro tasks submit "…"`},
		{[]string{"--state", "failed", "--search", "login"}, "no task matches the filters given"},
	} {
		code, out, errOut := runTasksCLI(t, map[string]string{}, append([]string{"tasks", "list", "--server", ts.URL}, tc.args...)...)
		if code != 0 || out != "" || !strings.Contains(errOut, tc.want) {
			t.Errorf("tasks list %v with no task: exit %d\nstdout:\n%s\nstderr:\n%s\nwant exit 0, no stdout, stderr %q", tc.args, code, out, errOut, tc.want)
		}
	}
}
