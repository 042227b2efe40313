package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// agentHeadless runs `maestro headless --agent …` in-process with a home
// holding the user-defined fake adapter and a PATH where "claude" is the
// fake permission-relay CLI (internal/agentcli/testdata).
type agentHeadless struct {
	e      *embedder
	stdin  *io.PipeWriter
	code   chan int
	stderr *bytes.Buffer
}

func startAgentHeadlessTest(t *testing.T, args ...string) *agentHeadless {
	t.Helper()
	td, err := filepath.Abs("../agentcli/testdata")
	if err != nil {
		t.Fatal(err)
	}
	home, bin := t.TempDir(), t.TempDir()
	yaml, err := os.ReadFile(filepath.Join(td, "user-adapter", "fake-agent.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(home, "agents"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "agents", "fake-agent.yaml"), yaml, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(td, "relay-fake", "fake-claude-relay"), filepath.Join(bin, "claude")); err != nil {
		t.Fatal(err)
	}
	path := bin + string(os.PathListSeparator) + filepath.Join(td, "user-adapter") + string(os.PathListSeparator) + os.Getenv("PATH")
	env := map[string]string{"MAESTRO_HOME": home, "PATH": path}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	h := &agentHeadless{stdin: inW, code: make(chan int, 1), stderr: &bytes.Buffer{}}
	streams := &IOStreams{In: inR, Out: outW, ErrOut: h.stderr, Getenv: func(k string) string { return env[k] }}
	go func() {
		h.code <- Run(ctx, streams, append([]string{"headless", "--workspace", t.TempDir()}, args...))
		outW.Close()
	}()
	v, err := validator()
	if err != nil {
		t.Fatal(err)
	}
	frames := make(chan map[string]any, 64)
	go func() {
		defer close(frames)
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if err := v.ValidateServerFrame(sc.Bytes()); err != nil {
				t.Errorf("frame does not validate: %s: %v", sc.Text(), err)
			}
			var f map[string]any
			if err := json.Unmarshal(sc.Bytes(), &f); err != nil {
				t.Errorf("stdout line is not JSON: %q", sc.Text())
				continue
			}
			frames <- f
		}
	}()
	h.e = &embedder{t: t, ctx: ctx, stdin: inW, frames: frames}
	return h
}

// until reads frames up to one of type typ, answering approvals with
// approve, and returns it.
func (h *agentHeadless) until(typ string, approve bool) map[string]any {
	for {
		f := h.e.next()
		if f["type"] == "server_request" && typ != "server_request" {
			h.e.send(fmt.Sprintf(`{"type":"server_request_response","request_id":%q,"request_type":"approval","approved":%v}`, f["request_id"], approve))
		}
		if f["type"] == typ {
			return f
		}
	}
}

func (h *agentHeadless) shutdown(t *testing.T) {
	t.Helper()
	h.e.send(`{"type":"shutdown"}`)
	for f := range h.e.frames {
		t.Errorf("frame after shutdown: %v", f)
	}
	if code := <-h.code; code != 0 {
		t.Fatalf("maestro headless exited %d\nstderr:\n%s", code, h.stderr)
	}
}

func TestHeadlessAgentUserAdapter(t *testing.T) {
	t.Parallel()
	h := startAgentHeadlessTest(t, "--agent", "fake-agent", "--model", "fake-agent/fake-9")
	if f := h.e.next(); f["type"] != "ready" || f["provider"] != "fake-agent" || f["model"] != "fake-9" || f["executor_type"] != "live" {
		t.Fatalf("first frame = %v", f)
	}
	h.e.send(`{"type":"prompt","content":"hello"}`)
	if f := h.until("response_chunk", false); f["content"] != "fake says: hello" {
		t.Errorf("chunk = %v", f)
	}
	if f := h.until("response_end", false); f["usage"].(map[string]any)["model_id"] != "fake-9" {
		t.Errorf("response_end = %v", f)
	}
	h.shutdown(t)
}

func TestHeadlessAgentApprovalRelay(t *testing.T) {
	t.Parallel()
	for _, approve := range []bool{true, false} {
		t.Run(fmt.Sprint("approve=", approve), func(t *testing.T) {
			t.Parallel()
			h := startAgentHeadlessTest(t, "--agent", "claude-code")
			h.e.send(`{"type":"hello","protocol_version":"2026-04-02","capabilities":{"server_requests":["approval"]}}`)
			h.e.send(`{"type":"prompt","content":"create the file"}`)
			req := h.until("server_request", approve)
			if req["request_type"] != "approval" || req["tool"] != "Bash" || req["call_id"] != "toolu_perm1" {
				t.Errorf("server_request = %v", req)
			}
			h.e.send(fmt.Sprintf(`{"type":"server_request_response","request_id":%q,"request_type":"approval","approved":%v}`, req["request_id"], approve))
			if f := h.until("tool_end", approve); f["success"] != approve {
				t.Errorf("tool_end = %v, want success %v", f, approve)
			}
			h.until("response_end", approve)
			h.shutdown(t)
		})
	}
}

func TestHeadlessAgentUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--agent", "no-such-agent"},
		{"--agent", "fake-agent", "--replay", "x.yaml"},
		{"--agent", "fake-agent", "--sandbox", "off"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			t.Parallel()
			h := startAgentHeadlessTest(t, args...)
			f := h.e.next()
			if f["type"] != "error" || f["fatal"] != true || !strings.Contains(f["message"].(string), args[len(args)-2]) {
				t.Errorf("frame = %v, want a fatal startup error naming %s", f, args[len(args)-2])
			}
			if code := <-h.code; code != ExitUsage {
				t.Errorf("exit %d, want %d", code, ExitUsage)
			}
		})
	}
}
