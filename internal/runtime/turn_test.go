package runtime

import (
	"context"
	"errors"
	"testing"

	"github.com/maestro-run/maestro/internal/protocol"
)

// A TurnFunc runs prompts without the model: its frames go out in order,
// its approval is a real server request, an error it returns is a
// non-fatal error frame, and the turn ends not responding.
func TestTurnFunc(t *testing.T) {
	t.Parallel()
	turn := func(ctx context.Context, tr *Turn, m protocol.Prompt) error {
		tr.Publish(protocol.Status{Message: "turn: " + m.Content})
		if m.Content == "fail" {
			return errors.New("turn failed")
		}
		res, _, err := tr.Approval(ctx, protocol.ServerRequest{RequestID: "r1", Tool: "bash", Args: raw(`{}`), Reason: "why"})
		if err != nil {
			return err
		}
		tr.Publish(protocol.Status{Message: "resolved: " + string(res)})
		return nil
	}
	model := &capture{}
	h := newHarness(t, Config{Provider: model, Turn: turn}, ConnectOptions{})
	if err := h.handle(protocol.Prompt{Content: "go"}); err != nil {
		t.Fatal(err)
	}
	h.waitType("server_request", 1)
	req := ofType[protocol.ServerRequest](h)[0]
	if req.RequestID != "r1" || req.CallID != "r1" || req.RequestType != protocol.RequestApproval || req.Reason != "why" {
		t.Errorf("server_request: %+v", req)
	}
	if err := h.handle(protocol.ServerRequestResponse{RequestID: "r1", RequestType: protocol.RequestApproval, Approved: ptr(true), Reason: "ok"}); err != nil {
		t.Fatal(err)
	}
	h.waitFor("the approved status", func(fs []protocol.Message) bool {
		for _, f := range fs {
			if s, ok := f.(protocol.Status); ok && s.Message == "resolved: approved" {
				return true
			}
		}
		return false
	})
	if err := h.rt.WaitIdle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s := h.rt.Snapshot().State; s.IsResponding || len(s.PendingApprovals) != 0 {
		t.Errorf("after the turn: responding %v, pending %v", s.IsResponding, s.PendingApprovals)
	}
	if model.last() != nil {
		t.Error("the model was called")
	}
	if err := h.handle(protocol.Prompt{Content: "fail"}); err != nil {
		t.Fatal(err)
	}
	h.waitType("error", 1)
	if e := ofType[protocol.Error](h)[0]; e.Message != "turn failed" || e.Fatal {
		t.Errorf("error frame: %+v", e)
	}
	h.rt.Broadcast(protocol.Status{Message: "broadcast"})
	h.waitFor("the broadcast", func(fs []protocol.Message) bool {
		s, ok := fs[len(fs)-1].(protocol.Status)
		return ok && s.Message == "broadcast"
	})
}

// A turn's PublishLast message goes out only once the run has ended, so a
// client that sends its next prompt on seeing it is never refused as busy
// (the hosted runner's fixture harness sends prompts back to back).
func TestTurnPublishLast(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	turn := func(ctx context.Context, tr *Turn, m protocol.Prompt) error {
		tr.PublishLast(protocol.Status{Message: "done: " + m.Content})
		tr.Publish(protocol.Status{Message: "working: " + m.Content})
		if m.Content == "first" {
			<-release
		}
		return nil
	}
	h := newHarness(t, Config{Provider: &capture{}, Turn: turn}, ConnectOptions{})
	hasStatus := func(text string) func([]protocol.Message) bool {
		return func(fs []protocol.Message) bool {
			for _, f := range fs {
				if s, ok := f.(protocol.Status); ok && s.Message == text {
					return true
				}
			}
			return false
		}
	}
	if err := h.handle(protocol.Prompt{Content: "first"}); err != nil {
		t.Fatal(err)
	}
	h.waitFor("the working status", hasStatus("working: first"))
	if hasStatus("done: first")(h.all()) {
		t.Fatal("the last status went out while the turn was still running")
	}
	if err := h.handle(protocol.Prompt{Content: "early"}); err == nil {
		t.Fatal("a prompt during the turn was accepted")
	}
	close(release)
	h.waitFor("the last status", hasStatus("done: first"))
	if err := h.handle(protocol.Prompt{Content: "second"}); err != nil {
		t.Fatalf("a prompt sent on seeing the last status: %v", err)
	}
	h.waitFor("the second turn's last status", hasStatus("done: second"))
}
