package engine

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/maestro-run/maestro/internal/piece"
	"github.com/maestro-run/maestro/internal/piece/piecetest"
	"github.com/maestro-run/maestro/internal/tool"
)

// badPiece has two faults the validator reports at once.
const badPiece = `name: notes
description: Keep notes.
max_movements: 0
initial_movement: write
movements:
  - name: write
    edit: false
    persona: You write notes.
    instruction: Write the notes.
    allowed_tools: [Write]
    rules: []
`

func runTool(t *testing.T, tl tool.Tool, input any) tool.Result {
	t.Helper()
	data, err := json.Marshal(input)
	if err != nil {
		t.Fatal(err)
	}
	res, err := tl.Run(context.Background(), tool.Call{ID: "c", Input: data})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestPieceTools(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	project := t.TempDir()
	lib, err := NewLibrary(context.Background(), []string{filepath.Join(home, "pieces"), project}, filepath.Join(home, "pieces"))
	if err != nil {
		t.Fatal(err)
	}
	create := lib.tool("CreatePiece")

	// A faulty piece: the validator's text, verbatim, as an error result.
	res := runTool(t, create, SavePieceInput{Name: "notes", YAMLContent: badPiece})
	_, verr := piece.Parse("notes.yaml", []byte(badPiece))
	if !res.IsError || res.Content != verr.Error() {
		t.Errorf("CreatePiece(bad) = %+v, want the validator's text %q", res, verr)
	}
	if !strings.Contains(res.Content, "notes.yaml:3:16: max_movements:") || !strings.Contains(res.Content, "notes.yaml:10:21: movements[0].allowed_tools[0]: Write needs edit: true") {
		t.Errorf("CreatePiece(bad) lacks file:line:col errors:\n%s", res.Content)
	}
	if _, err := os.Stat(filepath.Join(home, "pieces", "notes.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a rejected piece was saved: %v", err)
	}

	cases := []struct {
		name  string
		tool  string
		input SavePieceInput
		want  string
	}{
		{"name mismatch", "CreatePiece", SavePieceInput{Name: "other", YAMLContent: piecetest.Notes}, `other.yaml:1:7: name: expected "other", the name the piece is saved under, found "notes"`},
		{"path in name", "CreatePiece", SavePieceInput{Name: "../notes", YAMLContent: piecetest.Notes}, `expected "../notes"`},
		{"exists", "CreatePiece", SavePieceInput{Name: "code", YAMLContent: strings.Replace(piecetest.Notes, "name: notes", "name: code", 1)}, `a piece "code" already exists (builtin:code.yaml)`},
		{"update missing", "UpdatePiece", SavePieceInput{Name: "notes", YAMLContent: piecetest.Notes}, `there is no piece "notes" to update`},
		// The model may not grant itself more than the sandbox (a piece it
		// saves is in effect with no trust step).
		{"ssh grant", "CreatePiece", SavePieceInput{Name: "notes", YAMLContent: strings.Replace(piecetest.Notes, "allowed_tools: [Write]", "allowed_tools: [Write, SshExec]\n    allowed_ssh_connections: [\"*\"]", 1)},
			`CreatePiece refused: the piece grants more than the workspace sandbox (movement write: SshExec on SSH connections: *)`},
		{"general override with ssh", "UpdatePiece", SavePieceInput{Name: "general", YAMLContent: strings.Replace(strings.Replace(piecetest.Notes, "allowed_tools: [Write]", "allowed_tools: [Write, SshExec]\n    allowed_ssh_connections: [\"*\"]", 1), "name: notes", "name: general", 1)},
			`UpdatePiece refused`},
	}
	for _, tc := range cases {
		res := runTool(t, lib.tool(tc.tool), tc.input)
		if !res.IsError || !strings.Contains(res.Content, tc.want) {
			t.Errorf("%s: %+v, want an error containing %q", tc.name, res, tc.want)
		}
	}

	res = runTool(t, create, SavePieceInput{Name: "notes", YAMLContent: piecetest.Notes})
	path := filepath.Join(home, "pieces", "notes.yaml")
	if res.IsError || !strings.Contains(res.Content, "Piece notes created") {
		t.Fatalf("CreatePiece(good) = %+v", res)
	}
	if data, err := os.ReadFile(path); err != nil || string(data) != piecetest.Notes {
		t.Errorf("saved file = %q, %v", data, err)
	}
	if p, ok := lib.Get("notes"); !ok || p.InitialMovement != "write" {
		t.Errorf("the new piece is not in the library")
	}
	list := runTool(t, lib.tool("ListPieces"), struct{}{})
	if !strings.Contains(list.Content, "- notes ("+path+"; movements: write): Keep notes.") || !strings.Contains(list.Content, "- code (builtin:code.yaml; movements: plan, implement, verify)") {
		t.Errorf("ListPieces:\n%s", list.Content)
	}
	got := runTool(t, lib.tool("GetPiece"), GetPieceInput{Name: "notes"})
	if got.IsError || !strings.HasPrefix(got.Content, "# source: "+path+"\nname: notes\n") {
		t.Errorf("GetPiece:\n%s", got.Content)
	}
	if res := runTool(t, lib.tool("GetPiece"), GetPieceInput{Name: "nope"}); !res.IsError || !strings.Contains(res.Content, "general") {
		t.Errorf("GetPiece(nope) = %+v", res)
	}

	// UpdatePiece replaces the whole piece; a project override of the same
	// name takes precedence, and the tool says so.
	updated := strings.Replace(piecetest.Notes, "max_movements: 2", "max_movements: 4", 1)
	if err := os.WriteFile(filepath.Join(project, "notes.yaml"), []byte(piecetest.Notes), 0o644); err != nil {
		t.Fatal(err)
	}
	res = runTool(t, lib.tool("UpdatePiece"), SavePieceInput{Name: "notes", YAMLContent: updated})
	if res.IsError || !strings.Contains(res.Content, "Note: "+filepath.Join(project, "notes.yaml")+" takes precedence") {
		t.Errorf("UpdatePiece = %+v", res)
	}
	if data, _ := os.ReadFile(path); string(data) != updated {
		t.Errorf("updated file = %q", data)
	}
	// A built-in can be updated (overridden), never deleted.
	general := strings.Replace(piecetest.Notes, "name: notes", "name: general", 1)
	if res := runTool(t, lib.tool("UpdatePiece"), SavePieceInput{Name: "general", YAMLContent: general}); res.IsError {
		t.Errorf("UpdatePiece(general) = %+v", res)
	}
	if e, _ := lib.Catalog().Get("general"); e.Source != filepath.Join(home, "pieces", "general.yaml") || !e.Builtin {
		t.Errorf("general after update: %+v", e)
	}
}

func TestReadOnlyLibrary(t *testing.T) {
	t.Parallel()
	lib, err := NewLibrary(context.Background(), nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lib.Create(context.Background(), "notes", piecetest.Notes); err == nil || !strings.Contains(err.Error(), "no user piece directory") {
		t.Errorf("Create on a read-only library: %v", err)
	}
}
