package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/llm/replay"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/protocol/prototest"
	"github.com/maestro-run/maestro/internal/tool"
	"github.com/maestro-run/maestro/internal/workspace"
)

// scenario parses an inline replay scenario (YAML frames only).
func scenario(t testing.TB, tools string, frames string) llm.Provider {
	t.Helper()
	src := "schemaVersion: evalops.maestro.scripted-scenario.v1\nid: t\ndescription: test\n" +
		"metadata: {recordedAt: \"2026-01-01T00:00:00Z\", toolsExpected: [" + tools + "]}\nframes:\n" + frames
	s, err := replay.Parse([]byte(src), "t.yaml")
	if err != nil {
		t.Fatalf("scenario: %v", err)
	}
	return replay.New(s)
}

// capture is a provider that records requests and answers with text.
type capture struct {
	mu   sync.Mutex
	reqs []*llm.Request
}

func (c *capture) Name() string  { return "capture" }
func (c *capture) Model() string { return "capture-1" }
func (c *capture) Stream(_ context.Context, req *llm.Request) iter.Seq2[llm.Event, error] {
	c.mu.Lock()
	c.reqs = append(c.reqs, req)
	c.mu.Unlock()
	return func(yield func(llm.Event, error) bool) {
		msg := llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{llm.Text("ok")}}
		if yield(llm.Event{Type: llm.EventTextDelta, Delta: "ok"}, nil) {
			yield(llm.Event{Type: llm.EventDone, Response: &llm.Response{Message: msg, StopReason: llm.StopEndTurn}}, nil)
		}
	}
}

func (c *capture) last() *llm.Request {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.reqs) == 0 {
		return nil
	}
	return c.reqs[len(c.reqs)-1]
}

// harness is a runtime with one connection whose frames are collected.
type harness struct {
	t    testing.TB
	rt   *Runtime
	conn *Conn
	sub  *Subscription

	mu      sync.Mutex
	frames  []protocol.Message
	changed chan struct{} // closed and replaced on each frame
	done    chan struct{}
}

// newHarness starts a runtime (Tools default: Read and Write on a temp
// workspace) with a lossless subscription of connection "local".
func newHarness(t testing.TB, cfg Config, opts ConnectOptions) *harness {
	t.Helper()
	v := prototest.Validator(t)
	if cfg.Tools == nil {
		root, err := workspace.Open(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { root.Close() })
		set := tool.NewSet(tool.NewRead(root), tool.NewWrite(root))
		cfg.Tools = func(context.Context) (*tool.Set, error) { return set, nil }
	}
	if cfg.Validate == nil {
		cfg.Validate = v.ValidateServerFrame
	}
	rt, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if opts.ID == "" {
		opts.ID, opts.Local = LocalConnectionID, true
	}
	c, err := rt.Connect(opts)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := c.Subscribe(SubscribeOptions{From: FromOldest, Lossless: true})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, rt: rt, conn: c, sub: sub, done: make(chan struct{}), changed: make(chan struct{})}
	go func() {
		defer close(h.done)
		for {
			f, err := sub.Next(context.Background())
			if err != nil {
				return
			}
			if err := v.ValidateServerFrame(f.Data); err != nil {
				t.Errorf("frame does not validate: %s: %v", f.Data, err)
			}
			h.mu.Lock()
			h.frames = append(h.frames, f.Message)
			close(h.changed)
			h.changed = make(chan struct{})
			h.mu.Unlock()
		}
	}()
	rt.Start()
	t.Cleanup(func() { h.close() })
	return h
}

// close closes the runtime and waits for the collector.
func (h *harness) close() {
	h.rt.Close()
	<-h.done
}

func (h *harness) handle(m protocol.Message) error {
	return h.conn.Handle(context.Background(), m)
}

// waitFor waits (bounded) until the collected frames satisfy ok.
func (h *harness) waitFor(what string, ok func([]protocol.Message) bool) {
	h.t.Helper()
	h.waitWithin(10*time.Second, what, ok)
}

// waitWithin is waitFor with the bound d (a real CLI starts slowly on a
// loaded machine).
func (h *harness) waitWithin(d time.Duration, what string, ok func([]protocol.Message) bool) {
	h.t.Helper()
	timeout := time.NewTimer(d)
	defer timeout.Stop()
	for {
		h.mu.Lock()
		frames, ch := slices.Clone(h.frames), h.changed
		h.mu.Unlock()
		if ok(frames) {
			return
		}
		select {
		case <-ch:
		case <-timeout.C:
			h.t.Fatalf("timed out waiting for %s; frames: %v", what, h.types())
		}
	}
}

// waitType waits until n frames of type typ were collected.
func (h *harness) waitType(typ string, n int) {
	h.t.Helper()
	h.waitFor(fmt.Sprintf("%d %s frame(s)", n, typ), func(fs []protocol.Message) bool {
		c := 0
		for _, f := range fs {
			if f.MessageType() == typ {
				c++
			}
		}
		return c >= n
	})
}

// all returns the frames collected so far.
func (h *harness) all() []protocol.Message {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.frames)
}

// types returns the frame types collected so far.
// notes lists the messages of the error and status frames sent so far.
func (h *harness) notes() []string {
	var msgs []string
	for _, m := range h.all() {
		switch m := m.(type) {
		case protocol.Error:
			msgs = append(msgs, m.Message)
		case protocol.Status:
			msgs = append(msgs, m.Message)
		}
	}
	return msgs
}

func (h *harness) types() []string {
	var out []string
	for _, m := range h.all() {
		out = append(out, m.MessageType())
	}
	return out
}

// ofType returns the collected frames of type T.
func ofType[T protocol.Message](h *harness) []T {
	var out []T
	for _, m := range h.all() {
		if v, ok := m.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

func ptr[T any](v T) *T { return &v }

func raw(s string) json.RawMessage { return json.RawMessage(s) }

type jsonRaw = json.RawMessage
type toolSet = tool.Set
