package engine

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/maestro-run/maestro/internal/piece"
	"github.com/maestro-run/maestro/internal/skills"
	"github.com/maestro-run/maestro/internal/tool"
)

// A movement listing ReadSkill gets it when the run has skills, its
// description naming them, and it writes into the run's workspace;
// without Config.Skills it is omitted with the reason.
func TestMovementReadSkill(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "notes"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "notes", "SKILL.md"), []byte("---\nname: notes\ndescription: Take meeting notes\n---\nUse the template.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m := &piece.Movement{Name: "work", AllowedTools: []string{"Read", "ReadSkill"}}

	h := newHarness(t, "ask", func(c *Config) { c.Skills = &skills.Library{Dirs: []string{dir}} })
	r := h.engine().newRun(h.piece("ask"), &State{RunID: "run_skills"})
	set, omitted := r.movementTools(m, &movementCtl{})
	omitted = append(omitted, r.addSkillTool(context.Background(), m, set, &movementCtl{})...)
	if len(omitted) != 0 {
		t.Fatalf("omitted %v", omitted)
	}
	rs, ok := set.Get("ReadSkill")
	if !ok || !strings.Contains(rs.Spec().Description, "- notes: Take meeting notes") {
		t.Fatalf("ReadSkill offered %v, description %q", ok, rs.Spec().Description)
	}
	in, _ := json.Marshal(skills.ReadSkillInput{Name: "notes"})
	res, err := rs.Run(context.Background(), tool.Call{ID: "c1", Input: in})
	if err != nil || res.IsError {
		t.Fatalf("ReadSkill = %+v, %v", res, err)
	}
	if _, err := os.Stat(filepath.Join(h.ws, "skills", "notes", "SKILL.md")); err != nil {
		t.Fatalf("not materialised in the workspace: %v", err)
	}

	plain := newHarness(t, "ask")
	r = plain.engine().newRun(plain.piece("ask"), &State{RunID: "run_noskills"})
	_, omitted = r.movementTools(m, &movementCtl{})
	if len(omitted) != 1 || omitted[0].Name != "ReadSkill" || omitted[0].Reason != "no skills are configured" {
		t.Fatalf("without skills: omitted %v", omitted)
	}
}

// A skill left out of ReadSkill's list for a mistake (no front matter, a
// name that is not its directory's) is said once a run, naming its file:
// the model is not offered it, so it never asks and nothing else says why.
func TestSkillsLeftOutAreSaid(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, md := range map[string]string{
		"notes":  "---\nname: notes\ndescription: Take meeting notes\n---\n",
		"broken": "Use the template.\n",
		"other":  "---\nname: notes2\ndescription: x\n---\n",
	} {
		if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name, "SKILL.md"), []byte(md), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m := &piece.Movement{Name: "work", AllowedTools: []string{"ReadSkill"}}
	h := newHarness(t, "ask", func(c *Config) { c.Skills = &skills.Library{Dirs: []string{dir}} })
	r := h.engine().newRun(h.piece("ask"), &State{RunID: "run_skills"})
	for range 2 { // two movements: said once
		set, _ := r.movementTools(m, &movementCtl{})
		if omitted := r.addSkillTool(context.Background(), m, set, &movementCtl{}); len(omitted) != 0 {
			t.Fatalf("omitted %v", omitted)
		}
	}
	var said []string
	for _, line := range h.rec.flow() {
		if strings.HasPrefix(line, "status:skill") {
			said = append(said, line)
		}
	}
	want := []string{
		"status:skill not offered to the agent: skill broken: " + filepath.Join(dir, "broken", "SKILL.md") + ": expected YAML front matter",
		"status:skill not offered to the agent: skill other: " + filepath.Join(dir, "other", "SKILL.md") + ` names it "notes2"`,
	}
	if len(said) != len(want) {
		t.Fatalf("said %q; want %d lines like %q", said, len(want), want)
	}
	for i := range want {
		if !strings.HasPrefix(said[i], want[i]) {
			t.Errorf("said %q; want it to start %q", said[i], want[i])
		}
	}
}
