package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/maestro-run/maestro/internal/protocol"
)

// The server request manager (wire contract §9). A request is registered and
// announced (server_request, after any frames that precede it such as
// client_tool_request) under reqMu, and resolved (server_request_resolved)
// under reqMu by whoever takes it out of the table first: an answer, its
// timeout, an interrupt, or the end of its run. The waiter then receives
// the outcome on its channel.

// pendingRequest is one outstanding server request.
type pendingRequest struct {
	req     protocol.ServerRequest
	run     uint64
	started time.Time
	outcome chan outcome // buffered: exactly one send
}

// outcome is how a request ended.
type outcome struct {
	resolution protocol.Resolution
	by         protocol.ResolvedBy
	reason     string
	// cancelled: the runtime cancelled it (interrupt, shutdown, run end).
	cancelled bool
	approved  bool
	content   []protocol.ContentBlock
	isError   bool
	action    protocol.DecisionAction
}

// errRequestCancelled is returned to a waiter whose request the runtime
// cancelled.
var errRequestCancelled = errors.New("server request cancelled")

func (r *Runtime) resolvedFrame(p *pendingRequest, o outcome) protocol.ServerRequestResolved {
	return protocol.ServerRequestResolved{
		RequestID:   p.req.RequestID,
		RequestType: p.req.RequestType,
		CallID:      p.req.CallID,
		Resolution:  o.resolution,
		Reason:      o.reason,
		ResolvedBy:  o.by,
	}
}

// raise registers and announces a request (pre are published just before
// server_request) and waits for its outcome. It returns errRequestCancelled
// when the runtime cancelled it, or ctx's error.
func (r *Runtime) raise(ctx context.Context, run uint64, req protocol.ServerRequest, pre ...protocol.Message) (outcome, error) {
	p := &pendingRequest{req: req, run: run, started: r.now(), outcome: make(chan outcome, 1)}
	r.reqMu.Lock()
	if _, dup := r.reqs[req.RequestID]; dup {
		r.reqMu.Unlock()
		return outcome{}, fmt.Errorf("server request %s is already pending", req.RequestID)
	}
	r.reqs[req.RequestID] = p
	r.reqList = append(r.reqList, p)
	for _, m := range pre {
		r.publish(m, "")
	}
	r.publish(req, "")
	r.reqMu.Unlock()

	timer := time.NewTimer(r.cfg.Timeouts.of(req.RequestType))
	defer timer.Stop()
	select {
	case o := <-p.outcome:
		return finish(o)
	case <-timer.C:
		if r.take(p, timeoutOutcome(req.RequestType)) {
			return finish(timeoutOutcome(req.RequestType))
		}
		return finish(<-p.outcome)
	case <-ctx.Done():
		return outcome{}, ctx.Err()
	}
}

func finish(o outcome) (outcome, error) {
	if o.cancelled {
		return o, errRequestCancelled
	}
	return o, nil
}

// timeoutOutcome is the policy resolution of a request that timed out.
func timeoutOutcome(t protocol.RequestType) outcome {
	o := outcome{by: protocol.ResolvedByPolicy, isError: true}
	switch t {
	case protocol.RequestApproval:
		o.resolution, o.reason = protocol.ResolutionDenied, "Approval request timed out"
	case protocol.RequestClientTool:
		o.resolution, o.reason = protocol.ResolutionFailed, "Client tool request timed out"
	case protocol.RequestUserInput:
		o.resolution, o.reason = protocol.ResolutionFailed, "User input request timed out"
	case protocol.RequestMCPElicitation:
		o.resolution, o.reason = protocol.ResolutionFailed, "MCP elicitation request timed out"
	case protocol.RequestToolRetry:
		o.resolution, o.reason, o.action = protocol.ResolutionCancelled, "Tool retry request timed out", protocol.DecisionAbort
	}
	return o
}

// take removes p if it is still pending, publishes its resolution and
// delivers o. It reports whether it did.
func (r *Runtime) take(p *pendingRequest, o outcome) bool {
	r.reqMu.Lock()
	if r.reqs[p.req.RequestID] != p {
		r.reqMu.Unlock()
		return false
	}
	r.removeLocked(p)
	r.publish(r.resolvedFrame(p, o), "")
	r.reqMu.Unlock()
	p.outcome <- o
	return true
}

func (r *Runtime) removeLocked(p *pendingRequest) {
	delete(r.reqs, p.req.RequestID)
	r.reqList = slices.DeleteFunc(r.reqList, func(x *pendingRequest) bool { return x == p })
}

// cancelRequests resolves every pending request for which match is true as
// cancelled by the runtime, in the order they were raised, and returns
// them; deliverCancelled then wakes their waiters (after the caller has
// cancelled the run, so that waiters see the cancellation).
func (r *Runtime) cancelRequests(match func(*pendingRequest) bool, reason string) []*pendingRequest {
	r.reqMu.Lock()
	defer r.reqMu.Unlock()
	var out []*pendingRequest
	for _, p := range slices.Clone(r.reqList) {
		if !match(p) {
			continue
		}
		r.removeLocked(p)
		r.publish(r.resolvedFrame(p, cancelOutcome(reason)), "")
		out = append(out, p)
	}
	return out
}

func cancelOutcome(reason string) outcome {
	return outcome{resolution: protocol.ResolutionCancelled, by: protocol.ResolvedByRuntime, reason: reason, cancelled: true, action: protocol.DecisionAbort}
}

func deliverCancelled(ps []*pendingRequest) {
	for _, p := range ps {
		p.outcome <- cancelOutcome("")
	}
}

// answer takes the pending request id (if of kind want, when want is not
// empty) and resolves it with the outcome built by mk.
func (r *Runtime) answer(find func() (*pendingRequest, error), mk func(*pendingRequest) outcome) error {
	r.reqMu.Lock()
	p, err := find()
	if err != nil {
		r.reqMu.Unlock()
		return err
	}
	o := mk(p)
	r.removeLocked(p)
	r.publish(r.resolvedFrame(p, o), "")
	r.reqMu.Unlock()
	p.outcome <- o
	return nil
}

// respond handles server_request_response.
func (r *Runtime) respond(m protocol.ServerRequestResponse) error {
	if m.RequestType == protocol.RequestApproval && r.approvalMode() != protocol.ApprovalPrompt {
		r.publish(protocol.Status{Message: msgAutoIgnored}, "")
		return nil
	}
	find := func() (*pendingRequest, error) {
		p := r.reqs[m.RequestID]
		if p == nil {
			return nil, forbidden("No pending server request found for request_id: " + m.RequestID)
		}
		if p.req.RequestType != m.RequestType {
			return nil, forbidden(fmt.Sprintf("Pending request %s is %s, not %s", m.RequestID, p.req.RequestType, m.RequestType))
		}
		return p, nil
	}
	return r.answer(find, func(p *pendingRequest) outcome {
		isError := m.IsError != nil && *m.IsError
		switch p.req.RequestType {
		case protocol.RequestApproval:
			return approvalOutcome(m.Approved != nil && *m.Approved, m.Result)
		case protocol.RequestToolRetry:
			action := m.DecisionAction
			if action == "" {
				action = protocol.DecisionAbort
			}
			o := outcome{by: protocol.ResolvedByUser, reason: m.Reason, action: action}
			switch action {
			case protocol.DecisionRetry:
				o.resolution = protocol.ResolutionRetried
			case protocol.DecisionSkip:
				o.resolution = protocol.ResolutionSkipped
			default:
				o.resolution = protocol.ResolutionAborted
			}
			return o
		case protocol.RequestClientTool:
			return contentOutcome(protocol.ResolutionCompleted, m.Content, isError)
		default: // user_input, mcp_elicitation
			return contentOutcome(protocol.ResolutionAnswered, m.Content, isError)
		}
	})
}

func approvalOutcome(approved bool, res *protocol.ToolResult) outcome {
	o := outcome{by: protocol.ResolvedByUser, approved: approved}
	if approved {
		o.resolution, o.reason = protocol.ResolutionApproved, "Approved"
		if res != nil {
			o.reason = res.Output
		}
		return o
	}
	o.resolution, o.reason = protocol.ResolutionDenied, "Denied by user"
	if res != nil && res.Error != "" {
		o.reason = res.Error
	}
	return o
}

func contentOutcome(ok protocol.Resolution, content []protocol.ContentBlock, isError bool) outcome {
	o := outcome{resolution: ok, by: protocol.ResolvedByClient, content: content, isError: isError}
	if isError {
		o.resolution = protocol.ResolutionFailed
	}
	return o
}

// toolResponse handles the legacy approval answer.
func (r *Runtime) toolResponse(m protocol.ToolResponse) error {
	if r.approvalMode() != protocol.ApprovalPrompt {
		r.publish(protocol.Status{Message: msgAutoIgnored}, "")
		return nil
	}
	find := func() (*pendingRequest, error) {
		for _, p := range r.reqList {
			if p.req.RequestType == protocol.RequestApproval && p.req.CallID == m.CallID {
				return p, nil
			}
		}
		return nil, forbidden("No pending approval found for call_id: " + m.CallID)
	}
	return r.answer(find, func(*pendingRequest) outcome { return approvalOutcome(m.Approved, m.Result) })
}

// clientToolResult handles the legacy client tool answer (also accepted for
// ask_user).
func (r *Runtime) clientToolResult(m protocol.ClientToolResult) error {
	find := func() (*pendingRequest, error) {
		for _, p := range r.reqList {
			if (p.req.RequestType == protocol.RequestClientTool || p.req.RequestType == protocol.RequestUserInput) && p.req.CallID == m.CallID {
				return p, nil
			}
		}
		return nil, forbidden("No pending client tool request found for call_id: " + m.CallID)
	}
	return r.answer(find, func(p *pendingRequest) outcome {
		ok := protocol.ResolutionCompleted
		if p.req.RequestType == protocol.RequestUserInput {
			ok = protocol.ResolutionAnswered
		}
		return contentOutcome(ok, m.Content, m.IsError)
	})
}

// contentText renders client content for the model: text blocks joined
// with newlines, images as [image:<mime>].
func contentText(blocks []protocol.ContentBlock) string {
	parts := make([]string, 0, len(blocks))
	for _, b := range blocks {
		switch b.Type {
		case protocol.ContentText:
			parts = append(parts, b.Text)
		case protocol.ContentImage:
			parts = append(parts, "[image:"+b.MIMEType+"]")
		}
	}
	return strings.Join(parts, "\n")
}

// ElicitationRequest is an MCP server's elicitation/create (wire contract §9
// mcp_elicitation), raised by a session's MCP client (internal/mcp through
// internal/host).
type ElicitationRequest struct {
	ServerName string
	// RequestID is the MCP request id.
	RequestID string
	// Mode is "form" or "url".
	Mode            string
	Message         string
	RequestedSchema json.RawMessage
	URL             string
	ElicitationID   string
}

// ElicitationResult is the client's answer: Action is accept, decline or
// cancel; Content the form values when accepted.
type ElicitationResult struct {
	Action  string                     `json:"action"`
	Content map[string]json.RawMessage `json:"content,omitempty"`
}

// ElicitationWanted reports whether the connection whose prompt is running
// negotiated mcp_elicitation requests (wire contract §9: raised only when
// it did); an MCP client cancels an elicitation at once otherwise.
func (r *Runtime) ElicitationWanted() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.run != nil && r.run.conn != nil && r.run.conn.negotiated(protocol.RequestMCPElicitation)
}

// Elicit raises an mcp_elicitation request on behalf of an MCP server and
// waits for the answer (cancel when unparsable, failed or timed out).
func (r *Runtime) Elicit(ctx context.Context, e ElicitationRequest) (ElicitationResult, error) {
	args, err := json.Marshal(struct {
		ServerName      string          `json:"serverName"`
		RequestID       string          `json:"requestId"`
		Mode            string          `json:"mode"`
		Message         string          `json:"message"`
		RequestedSchema json.RawMessage `json:"requestedSchema,omitempty"`
		URL             string          `json:"url,omitempty"`
		ElicitationID   string          `json:"elicitationId,omitempty"`
	}{e.ServerName, e.RequestID, e.Mode, e.Message, e.RequestedSchema, e.URL, e.ElicitationID})
	if err != nil {
		return ElicitationResult{}, fmt.Errorf("encode elicitation: %w", err)
	}
	id := "mcp_elicitation:" + e.ServerName + ":" + e.RequestID
	r.mu.Lock()
	run := uint64(0)
	if r.run != nil {
		run = r.run.id
	}
	r.mu.Unlock()
	o, err := r.raise(ctx, run, protocol.ServerRequest{
		RequestID: id, RequestType: protocol.RequestMCPElicitation, CallID: id, Tool: "mcp_elicitation",
		Args: args, Reason: "MCP server requested additional user input",
	})
	if err != nil {
		return ElicitationResult{Action: "cancel"}, err
	}
	return parseElicitation(o), nil
}

func parseElicitation(o outcome) ElicitationResult {
	cancel := ElicitationResult{Action: "cancel"}
	if o.isError || len(o.content) != 1 || o.content[0].Type != protocol.ContentText {
		return cancel
	}
	var res ElicitationResult
	dec := json.NewDecoder(strings.NewReader(o.content[0].Text))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&res); err != nil {
		return cancel
	}
	switch res.Action {
	case "accept", "decline", "cancel":
	default:
		return cancel
	}
	for _, v := range res.Content {
		var x any
		if json.Unmarshal(v, &x) != nil {
			return cancel
		}
		switch x := x.(type) {
		case string, float64, bool:
		case []any:
			for _, s := range x {
				if _, ok := s.(string); !ok {
					return cancel
				}
			}
		default:
			return cancel
		}
	}
	return res
}
