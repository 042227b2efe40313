package hostedrunner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strings"

	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/runtime"
)

// ApprovalPrefix starts a fixture prompt that raises an approval request
// (wire contract §17): the rest of the content is JSON
// {request_id, tool, args, reason}.
const ApprovalPrefix = "__maestro_conformance_approval__:"

// fixtureApproval is the JSON after ApprovalPrefix.
type fixtureApproval struct {
	RequestID string          `json:"request_id"`
	Tool      string          `json:"tool"`
	Args      json.RawMessage `json:"args"`
	Reason    string          `json:"reason"`
}

// FixtureTurn is the deterministic agent of the fixture process contract
// (§17), a runtime.TurnFunc: no model is called. Every prompt publishes
// the status "Prompt: <content>"; a prompt starting with ApprovalPrefix
// then raises an approval server_request with the given request_id, tool,
// args and reason, waits for its resolution, and publishes the status
// "Approval <resolution>: <tool>".
func FixtureTurn(ctx context.Context, t *runtime.Turn, m protocol.Prompt) error {
	status := protocol.Status{Message: "Prompt: " + m.Content}
	rest, ok := strings.CutPrefix(m.Content, ApprovalPrefix)
	if !ok {
		// Published when the turn is over, so a harness may send its next
		// prompt as soon as it sees this status.
		t.PublishLast(status)
		return nil
	}
	t.Publish(status)
	var a fixtureApproval
	dec := json.NewDecoder(strings.NewReader(rest))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return fmt.Errorf("fixture approval prompt: expected %s{\"request_id\",\"tool\",\"args\",\"reason\"}: %v", ApprovalPrefix, err)
	}
	if a.RequestID == "" || a.Tool == "" {
		return errors.New("fixture approval prompt: request_id and tool are required")
	}
	if len(bytes.TrimSpace(a.Args)) == 0 || bytes.Equal(bytes.TrimSpace(a.Args), []byte("null")) {
		a.Args = json.RawMessage(`{}`)
	}
	if a.Reason == "" {
		a.Reason = "Requires approval"
	}
	res, _, err := t.Approval(ctx, protocol.ServerRequest{
		RequestID: a.RequestID, CallID: a.RequestID, Tool: a.Tool, Args: a.Args, Reason: a.Reason,
	})
	if err != nil {
		// Cancelled by an interrupt or shutdown: the resolution is
		// already published.
		return nil
	}
	t.PublishLast(protocol.Status{Message: fmt.Sprintf("Approval %s: %s", res, a.Tool)})
	return nil
}

// FixtureProvider names the deterministic agent in ready (provider
// "fixture", model "deterministic"). It is never called: the runtime runs
// prompts with FixtureTurn.
type FixtureProvider struct{}

// Name implements llm.Provider.
func (FixtureProvider) Name() string { return "fixture" }

// Model implements llm.Provider.
func (FixtureProvider) Model() string { return "deterministic" }

// Stream implements llm.Provider; it always fails.
func (FixtureProvider) Stream(context.Context, *llm.Request) iter.Seq2[llm.Event, error] {
	return func(yield func(llm.Event, error) bool) {
		yield(llm.Event{}, errors.New("the fixture agent calls no model"))
	}
}
