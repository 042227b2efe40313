package session

import (
	"testing"

	"github.com/maestro-run/maestro/internal/llm"
)

// A compaction summary logged as a message replaces the history before
// it (but its kept turns), live and when the session is opened again, so
// a resumed session continues from the compacted conversation.
func TestCompactionSurvivesReopen(t *testing.T) {
	t.Parallel()
	store := NewStore(t.TempDir())
	sess, err := store.Create(Meta{Workspace: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	summary := llm.UserText("SUMMARY")
	summary.Compaction = &llm.Compaction{Kept: 2, TokensBefore: 9000, TokensAfter: 1200}
	for _, m := range []llm.Message{
		llm.UserText("old prompt"),
		{Role: llm.RoleAssistant, Parts: []llm.Part{llm.Text("old answer")}},
		llm.UserText("recent prompt"),
		{Role: llm.RoleAssistant, Parts: []llm.Part{llm.Text("recent answer")}},
		summary,
		llm.UserText("next prompt"),
	} {
		sess.Message(m)
	}
	want := []string{"SUMMARY", "recent prompt", "recent answer", "next prompt"}
	check := func(what string, h []llm.Message) {
		t.Helper()
		var got []string
		for _, m := range h {
			got = append(got, m.TextContent())
		}
		if len(got) != len(want) {
			t.Fatalf("%s history %q, want %q", what, got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("%s history %q, want %q", what, got, want)
			}
		}
		if h[0].Compaction == nil || h[0].Compaction.TokensAfter != 1200 {
			t.Errorf("%s: the summary lost its compaction record: %+v", what, h[0])
		}
	}
	check("live", sess.History())
	if err := sess.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := store.Open(sess.ID())
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	check("reopened", again.History())
}
