package agentcli

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/maestro-run/maestro/internal/protocol"
)

// Capability gates. The twelve capability flags of an agent CLI
// (docs/agent-clis.md, "Capabilities gate"; each CLI's values in
// docs/spec/agent-clis.md) are data in every definition, and each turns
// its feature off when false:
//
//	resume           no resume arguments; a requested session starts fresh (a status says so)
//	read_only_mode   a read-only run is refused
//	json_output      no json_output arguments
//	session_id       no session id is reported (events, result, RunResult)
//	image_input      images are dropped (a status says so)
//	slash_commands   the CLI's slash commands are not read
//	session_storage  the CLI's session store is not read (no usage baseline,
//	                 no model lookup, maestro sessions refuses)
//	cost_tracking    costs are reported as 0
//	usage_stats      token counts are reported as 0
//	batch_mode       the executor refuses to run it (one prompt per process is batch mode)
//	streaming        chunks are held and sent as one chunk per kind when the response ends;
//	                 when true, the args.streaming builder is added (Claude's
//	                 --include-partial-messages: token-level chunks)
//	result_messages  the CLI's result text is not taken as the answer: the
//	                 text of the turn's last response is

// CapabilityFlag is one capability by its YAML name.
type CapabilityFlag struct {
	Name string `json:"name"`
	On   bool   `json:"on"`
}

// Flags lists every capability by YAML name, in declaration order.
func (c Capabilities) Flags() []CapabilityFlag {
	v := reflect.ValueOf(c)
	t := v.Type()
	out := make([]CapabilityFlag, 0, t.NumField())
	for i := range t.NumField() {
		out = append(out, CapabilityFlag{Name: t.Field(i).Tag.Get("yaml"), On: v.Field(i).Bool()})
	}
	return out
}

// gate applies the definition's capabilities to one run: it returns a copy
// of d whose argument builders of missing capabilities are empty (and with
// args.streaming added to json_output when streaming), inv without what the
// CLI cannot take, and a note per dropped request. A run the CLI cannot do
// at all is an error.
func (d *Definition) gate(inv Invocation) (*Definition, Invocation, []string, error) {
	c := d.Capabilities
	if !c.BatchMode {
		return nil, inv, nil, fmt.Errorf("start %s: it has no batch mode (capabilities.batch_mode is false): Maestro runs one prompt per process", d.ID)
	}
	if inv.Permission == PermissionReadOnly && !c.ReadOnlyMode {
		return nil, inv, nil, fmt.Errorf("start %s: it has no read-only mode (capabilities.read_only_mode is false); refusing a read-only run", d.ID)
	}
	g := *d
	g.Args.JSONOutput = append([]string(nil), d.Args.JSONOutput...)
	var notes []string
	if !c.Resume {
		g.Args.Resume = nil
		if inv.SessionID != "" {
			notes = append(notes, fmt.Sprintf("%s cannot resume a session; starting a new one instead of %s", d.Name, inv.SessionID))
			inv.SessionID = ""
		}
	}
	if !c.ImageInput {
		g.Args.Image, g.Args.ImagePrompt = nil, ""
		if len(inv.Images) > 0 {
			notes = append(notes, fmt.Sprintf("%s takes no images; %d image(s) not sent", d.Name, len(inv.Images)))
			inv.Images = nil
		}
	}
	if inv.Model != "" && len(d.Args.Model) == 0 {
		// Not passed, so not the model either: it would be reported as
		// the run's.
		notes = append(notes, fmt.Sprintf("%s takes no model (its definition has no args.model); --model %s not passed", d.Name, inv.Model))
		inv.Model = ""
	}
	if !c.JSONOutput {
		g.Args.JSONOutput = nil
	}
	if !c.ReadOnlyMode {
		g.Args.ReadOnly = nil
	}
	if c.Streaming {
		g.Args.JSONOutput = append(g.Args.JSONOutput, g.Args.Streaming...)
	}
	return &g, inv, notes, nil
}

// gateEvent applies the capabilities to the events of one line (nil
// capabilities: every feature on).
func (s *state) gateEvent(ev *Event) {
	c := s.opt.Capabilities
	if c == nil {
		return
	}
	if !c.SessionID {
		ev.SessionID = ""
	}
	if r := ev.Result; r != nil {
		if !c.SessionID {
			r.SessionID = ""
		}
		if !c.CostTracking {
			r.CostUSD, r.Usage.TotalCostUSD = 0, 0
		}
		if !c.UsageStats {
			r.Usage = zeroTokens(r.Usage)
		}
		if !c.ResultMessages {
			r.Text = strings.TrimSpace(s.lastRespText)
		}
	}
	for i, m := range ev.Messages {
		if end, ok := m.(protocol.ResponseEnd); ok {
			if !c.CostTracking {
				end.Usage.TotalCostUSD = 0
			}
			if !c.UsageStats {
				end.Usage = zeroTokens(end.Usage)
			}
			ev.Messages[i] = end
		}
	}
}

func zeroTokens(u protocol.Usage) protocol.Usage {
	u.InputTokens, u.OutputTokens, u.CacheReadTokens, u.CacheWriteTokens, u.TotalTokens = 0, 0, 0, 0, 0
	return u
}

// heldChunk is text held back while streaming is off.
type heldChunk struct {
	text     strings.Builder
	thinking bool
}

// hold keeps a chunk of the open response (streaming off): consecutive
// chunks of one kind are joined.
func (s *state) hold(text string, thinking bool) {
	if n := len(s.held); n > 0 && s.held[n-1].thinking == thinking {
		s.held[n-1].text.WriteString(text)
		return
	}
	h := &heldChunk{thinking: thinking}
	h.text.WriteString(text)
	s.held = append(s.held, h)
}

// release emits the held chunks of the open response.
func (s *state) release() {
	for _, h := range s.held {
		s.emit(protocol.ResponseChunk{ResponseID: s.respID, Content: h.text.String(), IsThinking: h.thinking})
	}
	s.held = nil
}
