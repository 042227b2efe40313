package eventbus

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/tool"
)

// frame is the part of a protocol message the mapping reads.
type frame struct {
	Type             string `json:"type"`
	CallID           string `json:"call_id"`
	Tool             string `json:"tool"`
	RequiresApproval bool   `json:"requires_approval"`
	Success          bool   `json:"success"`
	ErrorCode        string `json:"error_code"`
	RequestID        string `json:"request_id"`
	RequestType      string `json:"request_type"`
	Model            string `json:"model"`
	Provider         string `json:"provider"`
	ExecutorType     string `json:"executor_type"`
}

// toolEvents maps a protocol message of a session or a job to the
// catalogue's tool and policy events (docs/events.md, "Platform events"):
// tool_call → tool_call.attempted, tool_end → tool_call.completed (and
// sandbox_violation or firewall_block when the sandbox or the network
// guard refused the call, policyEvent), an approval
// server_request → approval_hit. calls remembers the tool of each call in
// flight (tool_end does not name it). Arguments and output are never
// copied: the events are content-free. The i-th event's id is
// idBase.i.
func toolEvents(f frame, idBase string, t time.Time, calls map[string]string) []Event {
	ev := func(i int, typ string, data map[string]any) Event {
		return Event{ID: idBase + "." + strconv.Itoa(i), Type: typ, Time: t, Data: data}
	}
	switch f.Type {
	case protocol.TypeToolCall:
		calls[f.CallID] = f.Tool
		return []Event{ev(0, TypeToolCallAttempted, map[string]any{
			"tool_call_id": f.CallID, "tool_name": f.Tool, "requires_approval": f.RequiresApproval,
		})}
	case protocol.TypeServerRequest:
		if f.RequestType != string(protocol.RequestApproval) {
			return nil
		}
		return []Event{ev(0, TypeApprovalHit, map[string]any{
			"request_id": f.RequestID, "tool_call_id": f.CallID, "tool_name": f.Tool,
			"decision_mode": "MAESTRO_DECISION_MODE_REQUIRE_APPROVAL",
		})}
	case protocol.TypeToolEnd:
		name := calls[f.CallID]
		delete(calls, f.CallID)
		data := map[string]any{"tool_call_id": f.CallID, "tool_name": name, "status": toolStatus(f)}
		if f.ErrorCode != "" {
			data["error_code"] = f.ErrorCode
		}
		out := []Event{ev(0, TypeToolCallCompleted, data)}
		if typ := policyEvent(f.ErrorCode); typ != "" {
			out = append(out, ev(1, typ, map[string]any{
				"tool_call_id": f.CallID, "tool_name": name, "error_code": f.ErrorCode,
			}))
		}
		return out
	}
	return nil
}

// policyEvent is the policy event a failed tool call also yields: the
// sandbox refused its command (sandbox_violation), the network guard
// refused a web tool's destination (firewall_block); "" for others.
func policyEvent(code string) string {
	switch code {
	case tool.CodeSandboxViolation:
		return TypeSandboxViolation
	case tool.CodeFirewallBlock:
		return TypeFirewallBlock
	}
	return ""
}

// toolStatus is tool_call.completed's status (wire contract §16 enums).
func toolStatus(f frame) string {
	switch {
	case f.Success:
		return "MAESTRO_TOOL_CALL_STATUS_SUCCEEDED"
	case f.ErrorCode == tool.CodeDenied:
		return "MAESTRO_TOOL_CALL_STATUS_DENIED"
	case f.ErrorCode == tool.CodeCancelled:
		return "MAESTRO_TOOL_CALL_STATUS_CANCELLED"
	}
	return "MAESTRO_TOOL_CALL_STATUS_FAILED"
}

// decodeFrame reads a protocol message's type and the fields above; a
// message that is not JSON yields a frame of no type (nothing to map).
func decodeFrame(data []byte) frame {
	var f frame
	_ = json.Unmarshal(data, &f)
	return f
}
