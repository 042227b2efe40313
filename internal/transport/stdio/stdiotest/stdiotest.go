// Package stdiotest drives the headless stdio transport in-process from
// transcript scripts: golden tests of the headless protocol exactly as an
// embedder sees it (client lines in, server lines out).
//
// A script is the client side of a session, one item per line:
//
//	{"type":"hello",…}      a client line, sent verbatim (malformed JSON too)
//	# comment               ignored, as are blank lines
//	@wait TYPE              wait for the next server frame of TYPE not yet
//	                        waited for (e.g. "@wait tool_start" before an
//	                        interrupt, "@wait server_request" before answering)
//	@idle                   wait until no prompt runs and no file search or
//	                        read is in flight
//	@oversize               send a line one byte longer than the limit
//	@eof                    close stdin now (it is closed after the last line
//	                        anyway, which shuts the runtime down)
//
// Golden runs a script testdata/NAME.in.jsonl and compares the normalised
// server lines with testdata/NAME.out.jsonl; with the test binary's
// -update flag set it rewrites the expected file instead. stdiotest does not
// define that flag: each test package declares its own
// (flag.Bool("update", false, "…")), and Golden looks it up by name.
//
// Every server frame is validated against the protocol's JSON Schemas; a
// frame that does not validate fails the test.
//
// Volatile values are normalised: the workspace path becomes $WORKSPACE,
// a path in its parent $WORKSPACE/../name, the session id $SESSION,
// response ids resp_1, resp_2, … in order of
// appearance, durations, ttft, pids, timestamps and epoch-millisecond
// fields 0, and ISO lease expiry times $TIME. Options.Normalize adds more.
//
// For the utility operations, set Options.Utilities to build the manager
// (internal/utility) on the runtime's emit function.
package stdiotest

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/llm/replay"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/protocol/prototest"
	"github.com/maestro-run/maestro/internal/runtime"
	"github.com/maestro-run/maestro/internal/session"
	"github.com/maestro-run/maestro/internal/tool"
	"github.com/maestro-run/maestro/internal/transport/stdio"
	"github.com/maestro-run/maestro/internal/transport/transporttest"
	"github.com/maestro-run/maestro/internal/workspace"
)

// Options configure a run. The zero value runs a one-frame replay
// scenario answering "ok" in a fresh workspace, approval mode auto.
type Options struct {
	// Workspace is the workspace directory; default a fresh temporary one.
	Workspace string
	// Scenario is a replay scenario file; default a scenario whose only
	// frame says "ok".
	Scenario string
	// Provider replaces the replay scenario (for tests of other models).
	Provider llm.Provider
	// ApprovalMode is the runtime's initial mode; default auto.
	ApprovalMode protocol.ApprovalMode
	ClientTools  []runtime.ClientTool
	// Utilities builds the utility operations on the workspace root and
	// the runtime's emit function.
	Utilities func(root *workspace.Root, emit func(protocol.Message)) runtime.Utilities
	// Tools returns extra tools added to the built-in set.
	Tools        func(root *workspace.Root) []tool.Tool
	Timeouts     runtime.Timeouts
	MaxLineBytes int
	// BufferFrames bounds the runtime's frame ring (default the runtime's).
	BufferFrames int
	// Timeout bounds the whole run; default 60 s.
	Timeout time.Duration
	// Normalize, when set, is applied to each line after the built-in
	// normalisation.
	Normalize func(line string) string
}

// Result is what a run produced.
type Result struct {
	// Lines are the normalised server lines; Raw the lines as written.
	Lines, Raw []string
	// Workspace is the workspace directory (symbolic links resolved).
	Workspace string
	// Runtime is the (closed) runtime, for snapshots.
	Runtime *runtime.Runtime
	// LogPath is the session log.
	LogPath string
	// Err is what stdio.Serve returned.
	Err error
}

// Run plays script against a fresh runtime over the stdio transport and
// returns what the server wrote.
func Run(t testing.TB, o Options, script string) Result {
	t.Helper()
	v := prototest.Validator(t)
	if o.Timeout <= 0 {
		o.Timeout = 60 * time.Second
	}
	if o.Workspace == "" {
		o.Workspace = t.TempDir()
	}
	if o.ApprovalMode == "" {
		o.ApprovalMode = protocol.ApprovalAuto
	}
	if o.MaxLineBytes <= 0 {
		o.MaxLineBytes = 4096
	}
	ctx, cancel := context.WithTimeout(t.Context(), o.Timeout)
	defer cancel()

	root, err := workspace.Open(o.Workspace)
	if err != nil {
		t.Fatalf("open workspace: %v", err)
	}
	defer root.Close()
	provider := o.Provider
	if provider == nil {
		provider = replay.New(transporttest.Scenario(t, o.Scenario))
	}
	tools := transporttest.Tools(t, root)
	if o.Tools != nil {
		for _, x := range o.Tools(root) {
			tools.Add(x)
		}
	}
	cfg, sess, err := transporttest.Session(session.NewStore(t.TempDir()), root, provider, tools, v)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ClientTools = o.ClientTools
	cfg.ApprovalMode = o.ApprovalMode
	cfg.Timeouts = o.Timeouts
	cfg.BufferFrames = o.BufferFrames
	if o.Utilities != nil {
		cfg.Utilities = func(emit func(protocol.Message)) runtime.Utilities { return o.Utilities(root, emit) }
	}
	rt, err := runtime.New(cfg)
	if err != nil {
		t.Fatalf("runtime: %v", err)
	}

	inR, inW := io.Pipe()
	out := newRecorder()
	served := make(chan error, 1)
	handled := make(chan struct{}, 1<<10)
	go func() {
		served <- stdio.Serve(ctx, stdio.Config{Runtime: rt, In: inR, Out: out, MaxLineBytes: o.MaxLineBytes,
			Handled: func() { handled <- struct{}{} }})
	}()

	res := Result{Workspace: root.Dir(), Runtime: rt, LogPath: sess.LogPath()}
	fail := func(format string, args ...any) {
		t.Helper()
		inW.Close()
		t.Fatalf("%s\nserver output so far:\n%s", fmt.Sprintf(format, args...), strings.Join(out.lines(), "\n"))
	}
	waited := map[string]int{}
	// send writes a line and waits until the server has handled it, giving
	// up when the server has stopped reading.
	send := func(data []byte) {
		t.Helper()
		done := make(chan error, 1)
		go func() { _, err := inW.Write(data); done <- err }()
		for {
			select {
			case err := <-done:
				if err != nil {
					fail("write client line: %v", err)
				}
				done = nil // written; now wait until it is handled
				continue
			case <-handled:
				return
			case err := <-served:
				// The server exits after handling shutdown: fine if this
				// line was handled.
				served <- err
				select {
				case <-handled:
					return
				default:
					fail("the server stopped before handling %q", truncate(string(data)))
				}
			case <-ctx.Done():
				fail("timed out sending %q", truncate(string(data)))
			}
		}
	}
	for _, raw := range strings.Split(script, "\n") {
		l := strings.TrimSpace(raw)
		switch {
		case l == "" || strings.HasPrefix(l, "#"):
		case strings.HasPrefix(l, "@wait "):
			typ := strings.TrimSpace(strings.TrimPrefix(l, "@wait "))
			waited[typ]++
			if err := out.waitFor(ctx, typ, waited[typ]); err != nil {
				fail("%s: %v", l, err)
			}
		case l == "@idle":
			if err := rt.WaitIdle(ctx); err != nil {
				fail("@idle: %v", err)
			}
		case l == "@oversize":
			send(append([]byte(`{"type":"prompt","content":"`+strings.Repeat("x", o.MaxLineBytes)), "\"}\n"...))
		case l == "@eof":
			inW.Close()
		case strings.HasPrefix(l, "@"):
			fail("unknown script directive %q", l)
		default:
			send([]byte(raw + "\n"))
		}
	}
	inW.Close()
	select {
	case res.Err = <-served:
	case <-ctx.Done():
		fail("timed out waiting for the server to exit")
	}
	if err := sess.Close(); err != nil {
		t.Errorf("close session: %v", err)
	}
	res.Raw = out.lines()
	n := newNormalizer(root.Dir(), o.Workspace, sess.ID(), o.Normalize)
	for _, l := range res.Raw {
		if err := v.ValidateServerFrame([]byte(l)); err != nil {
			t.Errorf("server frame does not validate against the protocol schemas: %s: %v", l, err)
		}
		if _, err := protocol.DecodeServer([]byte(l)); err != nil {
			t.Errorf("server frame does not decode strictly: %s: %v", l, err)
		}
		res.Lines = append(res.Lines, n.line(l))
	}
	return res
}

// Golden runs dir/NAME.in.jsonl and compares the normalised server lines
// with dir/NAME.out.jsonl (rewritten instead when -update is set).
func Golden(t *testing.T, o Options, dir, name string) Result {
	t.Helper()
	script, err := os.ReadFile(filepath.Join(dir, name+".in.jsonl"))
	if err != nil {
		t.Fatalf("read script: %v", err)
	}
	res := Run(t, o, string(script))
	got := strings.Join(res.Lines, "\n") + "\n"
	golden := filepath.Join(dir, name+".out.jsonl")
	if f := flag.Lookup("update"); f != nil && f.Value.String() == "true" {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatalf("update golden: %v", err)
		}
		return res
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("read golden (run with -update to create it): %v", err)
	}
	if got != string(want) {
		t.Errorf("%s: server lines differ from %s (run with -update to accept):\n%s", name, golden, lineDiff(string(want), got))
	}
	return res
}

// recorder collects the server's lines as they are written and lets the
// script wait for frame types.
type recorder struct {
	mu      sync.Mutex
	partial []byte
	all     []string
	counts  map[string]int
	changed chan struct{}
}

func newRecorder() *recorder {
	return &recorder{counts: map[string]int{}, changed: make(chan struct{})}
}

func (r *recorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.partial = append(r.partial, p...)
	for {
		i := bytes.IndexByte(r.partial, '\n')
		if i < 0 {
			break
		}
		l := string(r.partial[:i])
		r.partial = r.partial[i+1:]
		r.all = append(r.all, l)
		var head struct {
			Type string `json:"type"`
		}
		_ = json.Unmarshal([]byte(l), &head)
		r.counts[head.Type]++
	}
	close(r.changed)
	r.changed = make(chan struct{})
	return len(p), nil
}

func (r *recorder) lines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := append([]string(nil), r.all...)
	if len(r.partial) > 0 {
		out = append(out, string(r.partial))
	}
	return out
}

func (r *recorder) waitFor(ctx context.Context, typ string, n int) error {
	for {
		r.mu.Lock()
		have, ch := r.counts[typ], r.changed
		r.mu.Unlock()
		if have >= n {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("timed out waiting for %s frame #%d (saw %d)", typ, n, have)
		}
	}
}

// normalizer replaces volatile values.
type normalizer struct {
	repl  *strings.Replacer
	resp  map[string]string
	extra func(string) string
}

var (
	respID    = regexp.MustCompile(`resp_\d+_[0-9a-z]{6}`)
	volatileN = regexp.MustCompile(`"(duration_ms|ttft_ms|pid|timestamp|started_at_ms|resolved_at_ms|last_response_duration_ms|last_ttft_ms)":\d+`)
	isoTime   = regexp.MustCompile(`"(lease_expires_at|timestamp)":"[^"]*"`)
)

func newNormalizer(dir, given, sessionID string, extra func(string) string) *normalizer {
	pairs := []string{dir, "$WORKSPACE"}
	if given != dir {
		pairs = append(pairs, given, "$WORKSPACE")
	}
	// Paths just outside the workspace (rejected reads) read as
	// $WORKSPACE/../name.
	pairs = append(pairs, filepath.Dir(dir), "$WORKSPACE/..")
	if given != dir {
		pairs = append(pairs, filepath.Dir(given), "$WORKSPACE/..")
	}
	pairs = append(pairs, sessionID, "$SESSION")
	return &normalizer{repl: strings.NewReplacer(pairs...), resp: map[string]string{}, extra: extra}
}

func (n *normalizer) line(l string) string {
	l = n.repl.Replace(l)
	l = respID.ReplaceAllStringFunc(l, func(id string) string {
		if v, ok := n.resp[id]; ok {
			return v
		}
		v := "resp_" + strconv.Itoa(len(n.resp)+1)
		n.resp[id] = v
		return v
	})
	l = volatileN.ReplaceAllString(l, `"$1":0`)
	l = isoTime.ReplaceAllString(l, `"$1":"$$TIME"`)
	if n.extra != nil {
		l = n.extra(l)
	}
	return l
}

// lineDiff shows the first differing lines of two transcripts.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	shown := 0
	for i := 0; i < len(w) || i < len(g); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl == gl {
			continue
		}
		fmt.Fprintf(&b, "line %d:\n  want: %s\n  got:  %s\n", i+1, wl, gl)
		if shown++; shown == 8 {
			b.WriteString("  …\n")
			break
		}
	}
	return b.String()
}

func truncate(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
