package stdio_test

import (
	"bytes"
	"testing"
)

// TestPromptAfterTurnEnd: a client that sends its next prompt as soon as
// it reads the turn's last response_end (docs/protocol.md: a response_end
// no tool_call follows ends the turn) has it run. About one in three was
// refused with "Headless runtime is already processing a prompt": the
// response_end went out before the run had ended.
func TestPromptAfterTurnEnd(t *testing.T) {
	t.Parallel()
	s := startSession(t, chunker{n: 10})
	prompt := []byte(`{"type":"prompt","content":"go"}` + "\n")
	for i := range 1000 {
		if _, err := s.in.Write(prompt); err != nil {
			t.Fatal(err)
		}
		for {
			line, err := s.out.ReadSlice('\n')
			if err != nil {
				t.Fatal(err)
			}
			if bytes.HasPrefix(line, []byte(`{"type":"error"`)) {
				t.Fatalf("prompt %d after the last response_end: %s", i+1, line)
			}
			if bytes.HasPrefix(line, []byte(`{"type":"response_end"`)) {
				break
			}
		}
	}
	s.close(t)
}
