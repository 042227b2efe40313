package queue_test

import (
	"testing"

	"github.com/maestro-run/maestro/internal/queue"
)

const storedPiece = `name: paint
description: One movement that may ask the user a question.
max_movements: 5
initial_movement: work
movements:
  - name: work
    edit: false
    persona: You do the work and ask when a decision is the user's.
    instruction: Do the task; ask the user when the colour is not given.
    allowed_tools: [Read]
    rules: []
`

func TestStoreLibraryMergesStoredPieces(t *testing.T) {
	t.Parallel()
	st := openSQLite(t, nil)
	if _, err := st.CreatePiece(t.Context(), "paint", storedPiece); err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreatePiece(t.Context(), "broken", "name: broken\n"); err != nil {
		t.Fatal(err)
	}
	lib, err := queue.StoreLibrary(t.Context(), st)
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := lib.Get("paint"); !ok || p.InitialMovement != "work" {
		t.Errorf("stored piece missing: %+v", p)
	}
	if _, ok := lib.Get("general"); !ok {
		t.Error("built-in piece general missing")
	}
	if _, ok := lib.Get("broken"); ok {
		t.Error("an invalid stored piece was loaded")
	}
}
