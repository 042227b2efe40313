package skills_test

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/maestro-run/maestro/internal/skills"
	"github.com/maestro-run/maestro/internal/store"
	"github.com/maestro-run/maestro/internal/store/sqlite"
	"github.com/maestro-run/maestro/internal/store/sqlite/sqlitetest"
	"github.com/maestro-run/maestro/internal/tool"
	"github.com/maestro-run/maestro/internal/workspace"
	"github.com/maestro-run/maestro/internal/workspace/wstest"
)

func skillMD(name, desc string) string {
	return "---\nname: " + name + "\ndescription: " + desc + "\n---\n# " + name + "\nRun scripts/run.sh.\n"
}

// writeSkill writes files (relative path → content) under dir/name.
func writeSkill(t *testing.T, dir, name string, files map[string]string) {
	t.Helper()
	wstest.WriteFiles(t, filepath.Join(dir, name), files)
}

func TestParseMeta(t *testing.T) {
	tests := []struct {
		name, in string
		want     skills.Meta
		wantErr  string
	}{
		{"ok", skillMD("pdf", "Fill PDF forms"), skills.Meta{Name: "pdf", Description: "Fill PDF forms"}, ""},
		{"crlf", "---\r\nname: x\r\ndescription: d\r\n---\r\nbody", skills.Meta{Name: "x", Description: "d"}, ""},
		{"no front matter", "# pdf\n", skills.Meta{}, "expected YAML front matter"},
		{"unclosed", "---\nname: x\n", skills.Meta{}, "no closing ---"},
		{"no name", "---\ndescription: d\n---\n", skills.Meta{}, "name is required"},
		{"no description", "---\nname: x\n---\n", skills.Meta{}, "description is required"},
		{"bad name", "---\nname: PDF Tools\ndescription: d\n---\n", skills.Meta{}, "SKILL.md:2:7: front matter: name: expected 1-64 lowercase"},
		// What editors leave: a byte order mark, spaces after a ---.
		{"bom and spaces", "\ufeff--- \nname: x\ndescription: d\n---\t\nbody", skills.Meta{Name: "x", Description: "d"}, ""},
		// Positions are the file's lines (the YAML starts on line 2):
		// they said "yaml: line 2" for line 3.
		{"syntax error", "---\nname: x\ndescription: a: b\n---\n", skills.Meta{}, "SKILL.md:3:15: front matter: YAML syntax error: mapping values are not allowed"},
		{"unclosed list", "---\nname: x\ndescription: [a\n---\n", skills.Meta{}, "(while parsing a flow sequence started at 3:14)"},
		{"list name", "---\nname: [a]\ndescription: d\n---\n", skills.Meta{}, "SKILL.md:2:7: front matter: name: expected a string, found a list"},
		{"not a mapping", "---\njust text\n---\n", skills.Meta{}, "SKILL.md:2:1: front matter: expected name: and description: fields, found string"},
		{"misspelt", "---\nname: x\ndescripton: d\n---\n", skills.Meta{}, "SKILL.md:3:1: front matter: description is required; found descripton: (did you mean description:?)"},
		{"other fields", "---\nname: x\ndescription: d\nlicense: MIT\nmetadata: {a: 1}\n---\n", skills.Meta{Name: "x", Description: "d"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := skills.ParseMeta([]byte(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseMeta = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// TestReadSkill materialises skills from the project's directory, the
// user's directory and the server's store into a workspace's skills/,
// through the tool the engine offers: the description lists every skill,
// the first source wins, a link out of a skill directory is not copied,
// and an unknown name lists the available ones.
func TestReadSkill(t *testing.T) {
	project, home, work := t.TempDir(), t.TempDir(), t.TempDir()
	projectSkills := filepath.Join(project, ".maestro", "skills")
	writeSkill(t, projectSkills, "pdf", map[string]string{"SKILL.md": skillMD("pdf", "Fill PDF forms (project)"), "scripts/run.sh": "echo project\n"})
	writeSkill(t, filepath.Join(home, "skills"), "pdf", map[string]string{"SKILL.md": skillMD("pdf", "Fill PDF forms (user)")})
	writeSkill(t, filepath.Join(home, "skills"), "slides", map[string]string{"SKILL.md": skillMD("slides", "Make slides"), "theme.css": "body{}\n"})
	writeSkill(t, filepath.Join(home, "skills"), "broken", map[string]string{"SKILL.md": "no front matter"})
	secret := filepath.Join(t.TempDir(), "secret.txt")
	if err := os.WriteFile(secret, []byte("outside"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(home, "skills", "slides", "leak.txt")); err != nil {
		t.Fatal(err)
	}

	st := sqlitetest.Open(t, sqlite.Options{})
	if _, err := st.CreateSkill(t.Context(), store.Skill{Name: "release", Description: "Cut a release",
		Files: map[string]string{"SKILL.md": skillMD("release", "Cut a release"), "checklist.md": "- tag\n"}}); err != nil {
		t.Fatal(err)
	}

	lib := skills.DefaultLibrary(project, home)
	lib.Store = st
	root, err := workspace.Open(work)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	rs, err := skills.NewReadSkill(t.Context(), lib, root)
	if err != nil {
		t.Fatal(err)
	}
	desc := rs.Spec().Description
	for _, want := range []string{"- pdf: Fill PDF forms (project)", "- release: Cut a release", "- slides: Make slides"} {
		if !strings.Contains(desc, want) {
			t.Errorf("description %q lacks %q", desc, want)
		}
	}
	if strings.Contains(desc, "broken") {
		t.Errorf("description lists the malformed skill: %q", desc)
	}

	tests := []struct {
		name      string
		isError   bool
		contains  []string
		wantFiles map[string]string
	}{
		{"pdf", false, []string{"skills/pdf/scripts/run.sh", "Run scripts/run.sh."},
			map[string]string{"skills/pdf/SKILL.md": skillMD("pdf", "Fill PDF forms (project)"), "skills/pdf/scripts/run.sh": "echo project\n"}},
		{"slides", false, []string{"skills/slides/theme.css"}, map[string]string{"skills/slides/theme.css": "body{}\n"}},
		{"release", false, []string{"skills/release/checklist.md", "# release"}, map[string]string{"skills/release/checklist.md": "- tag\n"}},
		{"nope", true, []string{`no skill "nope"`, "pdf, release, slides"}, nil},
		{"broken", true, []string{"expected YAML front matter"}, nil},
		{"../pdf", true, []string{"name"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			raw, _ := json.Marshal(skills.ReadSkillInput{Name: tc.name})
			res, err := rs.Run(t.Context(), tool.Call{ID: "c", Input: raw})
			if err != nil {
				t.Fatal(err)
			}
			if res.IsError != tc.isError {
				t.Fatalf("IsError = %v; content:\n%s", res.IsError, res.Content)
			}
			for _, c := range tc.contains {
				if !strings.Contains(res.Content, c) {
					t.Errorf("content lacks %q:\n%s", c, res.Content)
				}
			}
			for p, want := range tc.wantFiles {
				got, err := os.ReadFile(filepath.Join(work, filepath.FromSlash(p)))
				if err != nil || string(got) != want {
					t.Errorf("%s = %q, %v; want %q", p, got, err, want)
				}
			}
		})
	}
	if _, err := os.Lstat(filepath.Join(work, "skills", "slides", "leak.txt")); !os.IsNotExist(err) {
		t.Errorf("the link out of the skill directory was materialised (%v)", err)
	}
	infos, err := lib.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, i := range infos {
		names = append(names, i.Name+"/"+i.Source)
	}
	if diff := cmp.Diff([]string{"pdf/dir", "release/store", "slides/dir"}, names); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}
}

// TestListAsFilesRead: the skills listed are those ReadSkill would read.
// A project skill whose SKILL.md is malformed listed the user's skill of
// that name, which ReadSkill then failed to read (it read the project's);
// a skill directory that is a link out of the skills directory was left
// out of the list, but ReadSkill copied its files from wherever it
// pointed.
func TestListAsFilesRead(t *testing.T) {
	t.Parallel()
	project, home, outside := t.TempDir(), t.TempDir(), t.TempDir()
	writeSkill(t, project, "pdf", map[string]string{"SKILL.md": "---\nname: pdf\ndescription: [unclosed\n---\n"})
	writeSkill(t, home, "pdf", map[string]string{"SKILL.md": skillMD("pdf", "Fill PDF forms (user)")})
	writeSkill(t, outside, "notes", map[string]string{"SKILL.md": skillMD("notes", "Take notes"), "secret.txt": "outside"})
	if err := os.Symlink(filepath.Join(outside, "notes"), filepath.Join(project, "notes")); err != nil {
		t.Fatal(err)
	}
	lib := &skills.Library{Dirs: []string{project, home}}
	infos, err := lib.List(t.Context())
	if err != nil || len(infos) != 0 {
		t.Errorf("List = %+v, %v; want none", infos, err)
	}
	if _, err := lib.Files(t.Context(), "pdf"); err == nil || !strings.Contains(err.Error(), filepath.Join(project, "pdf", "SKILL.md")+":4:1: front matter: YAML syntax error") {
		t.Errorf("Files(pdf): %v, want the project's malformed front matter, with its file and line", err)
	}
	if files, err := lib.Files(t.Context(), "notes"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Files(notes) = %d files, %v; want fs.ErrNotExist", len(files), err)
	}
}

// TestPlantedSkillsDirLink: the agent can write the workspace, so it can
// put a link at .maestro/skills, or at .maestro, to a directory of the
// host its sandbox does not show (another agent CLI's skills, with their
// scripts and keys). ReadSkill then copied that directory's skill into
// the workspace for the agent to read: the project's skills directory was
// opened following links. It is now reached from the workspace without
// following one, and the run is told why its skills are not offered.
func TestPlantedSkillsDirLink(t *testing.T) {
	t.Parallel()
	outside := t.TempDir()
	writeSkill(t, filepath.Join(outside, "skills"), "deploy", map[string]string{"SKILL.md": skillMD("deploy", "Deploy"), "creds.env": "SECRET=1\n"})
	for _, tc := range []struct{ name, link, target string }{
		{"skills", ".maestro/skills", filepath.Join(outside, "skills")},
		{"maestro", ".maestro", outside},
		{"relative inside", ".maestro/skills", "../real"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			work := t.TempDir()
			if err := os.MkdirAll(filepath.Join(work, ".maestro"), 0o755); err != nil {
				t.Fatal(err)
			}
			if tc.target == "../real" {
				writeSkill(t, filepath.Join(work, ".maestro", "real"), "deploy", map[string]string{"SKILL.md": skillMD("deploy", "Deploy")})
			}
			if tc.link == ".maestro" {
				os.Remove(filepath.Join(work, ".maestro"))
			}
			if err := os.Symlink(tc.target, filepath.Join(work, filepath.FromSlash(tc.link))); err != nil {
				t.Fatal(err)
			}
			lib := skills.DefaultLibrary(work, t.TempDir())
			if infos, err := lib.List(t.Context()); err != nil || len(infos) != 0 {
				t.Errorf("List = %+v, %v; want none", infos, err)
			}
			root, err := workspace.Open(work)
			if err != nil {
				t.Fatal(err)
			}
			defer root.Close()
			if written, err := lib.Materialize(t.Context(), "deploy", root); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("Materialize(deploy) wrote %v, %v; want fs.ErrNotExist", written, err)
			}
			if _, err := os.Lstat(filepath.Join(work, "skills")); !os.IsNotExist(err) {
				t.Errorf("skills/ was written (%v)", err)
			}
			if probs := lib.Problems(); len(probs) != 1 || !strings.Contains(probs[0].Error(), "leads through a symbolic link") {
				t.Errorf("Problems = %v; want the link named", probs)
			}
		})
	}
}

// TestLinkedSkillFile: a SKILL.md that is a link is refused by name. It
// was listed when it pointed into the skills directory, and ReadSkill then
// said the file had no front matter (its files are read without links).
func TestLinkedSkillFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeSkill(t, dir, "pdf", map[string]string{"real.md": skillMD("pdf", "Fill PDF forms")})
	if err := os.Symlink("real.md", filepath.Join(dir, "pdf", "SKILL.md")); err != nil {
		t.Fatal(err)
	}
	lib := &skills.Library{Dirs: []string{dir}}
	if infos, err := lib.List(t.Context()); err != nil || len(infos) != 0 {
		t.Errorf("List = %+v, %v; want none (ReadSkill cannot read it)", infos, err)
	}
	_, err := lib.Files(t.Context(), "pdf")
	if want := filepath.Join(dir, "pdf", "SKILL.md") + " is a symbolic link, not a regular file"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Files(pdf): %v; want %q", err, want)
	}
}

// TestSkillTooLarge: a skill over its 4 MiB is refused as such. The file
// where the total passed it was said to be over "the limit" of what was
// left (a 1.5 MB file "over the limit of 1194304 bytes"), as if that were
// a limit of one file.
func TestSkillTooLarge(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	chunk := strings.Repeat("x", 1_500_000)
	writeSkill(t, dir, "big", map[string]string{"SKILL.md": skillMD("big", "Big"), "a.bin": chunk, "b.bin": chunk, "c.bin": chunk})
	_, err := (&skills.Library{Dirs: []string{dir}}).Files(t.Context(), "big")
	want := "skill big: the files of " + filepath.Join(dir, "big") + " come to more than 4194304 bytes (at c.bin), the limit of one skill"
	if err == nil || err.Error() != want {
		t.Errorf("Files(big): %v; want %q", err, want)
	}
}
