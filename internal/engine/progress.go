package engine

import (
	"fmt"
	"slices"

	"github.com/maestro-run/maestro/internal/agent"
	"github.com/maestro-run/maestro/internal/llm"
)

// A movement's progress (Config.KeepProgress): the conversation of the
// movement in progress is saved in the run state after each round of tool
// results. A run interrupted in the middle of a movement (its process
// killed, its worker gone) is resumed in that movement with that
// conversation, not briefed afresh: the model sees what it did so far and
// a note that the run was interrupted. What is replayed: the model turn
// that was in flight, and the tool calls of the round that had not ended
// (their results were never saved), so a tool call running at the
// interruption may run twice; the note asks the model to check its effect
// first. Usage of the interrupted model turns is not counted.

// progressSink passes a movement's agent output on and records its
// conversation, saving it in the state after each round of tool results.
type progressSink struct {
	agent.Sink
	r    *run
	conv []llm.Message
}

// begin starts recording an agent run that continues history (a nil
// sink records nothing).
func (s *progressSink) begin(history []llm.Message) {
	if s != nil {
		s.conv = slices.Clone(history)
	}
}

// Message implements agent.Sink.
func (s *progressSink) Message(m llm.Message) {
	s.Sink.Message(m)
	s.conv = append(s.conv, m)
	if m.Role != llm.RoleUser || !hasToolResult(m) {
		return
	}
	r := s.r
	r.mu.Lock()
	r.st.Progress = slices.Clone(s.conv)
	r.mu.Unlock()
	r.save()
}

func hasToolResult(m llm.Message) bool {
	for _, p := range m.Parts {
		if p.Type == llm.PartToolResult {
			return true
		}
	}
	return false
}

// continueProgress prepares Resume of an interrupted run to continue the
// movement's saved conversation: the model turns it holds are counted as
// played (a replay run plays its script on from there).
func (r *run) continueProgress() {
	st := r.st
	if !r.cfg.KeepProgress || len(st.Progress) == 0 {
		st.Progress = nil
		return
	}
	turns := 0
	for _, m := range st.Progress {
		if m.Role == llm.RoleAssistant {
			turns++
		}
	}
	st.ModelTurns = st.FrameBase + turns
}

// progressInput continues the saved conversation: its last message (the
// last round of tool results) carries a note that the run was resumed.
func (r *run) progressInput() ([]llm.Message, llm.Message) {
	conv := r.st.Progress
	note := "Maestro was interrupted during this movement and has resumed it"
	if r.restartReason != "" {
		note += " (" + r.restartReason + ")"
	}
	note = fmt.Sprintf("%s. The conversation continues where it was last saved: a tool call you made after these results may not have run, or may have run without its result reaching you; check its effect before repeating it, then carry on with movement %s.", note, r.st.Movement)
	last := conv[len(conv)-1]
	msg := llm.Message{Role: last.Role, Parts: append(slices.Clone(last.Parts), llm.Part{Type: llm.PartText, Text: note})}
	return slices.Clone(conv[:len(conv)-1]), msg
}

// RestoreState makes data, a state document as Config.StateSaved was
// given it, the state of the run in runDir, replacing the state found
// there (a worker resuming a job from the store). No symbolic link is
// followed below runDir.
func RestoreState(runDir string, data []byte) error {
	var st State
	if err := strictJSON(data, &st); err != nil {
		return fmt.Errorf("restore run state: %w", err)
	}
	if st.Version != StateVersion {
		return fmt.Errorf("restore run state: version %d, this build reads version %d", st.Version, StateVersion)
	}
	return runPath{base: runDir}.writeFile(StateFile, data, 0o600)
}
