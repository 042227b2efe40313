// Package skills finds skills and materialises them into a task's
// workspace (docs/skills.md). A skill is a directory holding a SKILL.md
// whose YAML front matter names and describes it, and the files its
// instructions use (scripts, templates, references). Skills come from the
// user's ~/.maestro/skills/, the project's ./.maestro/skills/ and, under
// `maestro serve`, the server's store (POST /api/v1/skills); the ReadSkill
// tool copies one into the workspace's skills/<name>/ for the agent to read.
package skills

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"slices"
	"strings"

	"go.yaml.in/yaml/v4"

	"github.com/maestro-run/maestro/internal/store"
	"github.com/maestro-run/maestro/internal/workspace"
)

// Dir is the directory under a workspace that skills are materialised
// into (the job layout's skills/).
const Dir = "skills"

// Meta is what a SKILL.md's front matter says of its skill.
type Meta struct {
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
}

// ParseMeta reads the front matter of a SKILL.md: a YAML block between a
// first line "---" and the next "---". Name and description are required.
func ParseMeta(skillMD []byte) (Meta, error) {
	text := strings.ReplaceAll(string(skillMD), "\r\n", "\n")
	rest, ok := strings.CutPrefix(text, "---\n")
	if !ok {
		return Meta{}, errors.New(store.SkillFile + ": expected YAML front matter between --- lines at the top (name: and description:)")
	}
	front, _, ok := strings.Cut(rest, "\n---")
	if !ok {
		return Meta{}, errors.New(store.SkillFile + ": the front matter has no closing --- line")
	}
	var m Meta
	if err := yaml.Unmarshal([]byte(front), &m); err != nil {
		return Meta{}, fmt.Errorf("%s front matter: %w", store.SkillFile, err)
	}
	m.Name, m.Description = strings.TrimSpace(m.Name), strings.TrimSpace(m.Description)
	switch {
	case m.Name == "":
		return Meta{}, errors.New(store.SkillFile + " front matter: name is required")
	case m.Description == "":
		return Meta{}, errors.New(store.SkillFile + " front matter: description is required")
	}
	if err := store.ValidateName("name", m.Name); err != nil {
		return Meta{}, fmt.Errorf("%s front matter: %w", store.SkillFile, err)
	}
	return m, nil
}

// Store is the part of the server's store skills are read from.
type Store interface {
	ListSkills(ctx context.Context) ([]store.Skill, error)
	GetSkill(ctx context.Context, name string) (store.Skill, error)
}

// Sources of a skill, as Info.Source says.
const (
	SourceDir   = "dir"
	SourceStore = "store"
)

// Info describes one available skill.
type Info struct {
	Name        string
	Description string
	// Source is SourceDir or SourceStore; Where is the directory (for a
	// directory skill).
	Source, Where string
}

// Library is the skills available to a task: directories (each holding
// one directory per skill), then the store. The first source that has a
// name wins, so a project's skill overrides the user's and the server's.
type Library struct {
	// Dirs are searched in order (missing ones are skipped).
	Dirs []string
	// Store, if set, holds the server's skills.
	Store Store
}

// DefaultDirs are the skill directories of a run in workdir: the
// project's ./.maestro/skills, then the user's <home>/skills (home is
// Maestro's home, ~/.maestro).
func DefaultDirs(workdir, home string) []string {
	var out []string
	if workdir != "" {
		out = append(out, path.Join(workdir, ".maestro", Dir))
	}
	if home != "" {
		out = append(out, path.Join(home, Dir))
	}
	return out
}

// List returns the available skills by name. A name is the first
// source's that has a directory of that name with a SKILL.md, as Files
// reads it: a directory skill whose SKILL.md is malformed is left out
// (ReadSkill names the problem when it is asked for it), and hides the
// later sources' skill of that name, which Files would not read either.
func (l *Library) List(ctx context.Context) ([]Info, error) {
	byName := map[string]Info{}
	taken := map[string]bool{}
	for _, d := range l.Dirs {
		infos, present := dirSkills(d)
		for _, info := range infos {
			if !taken[info.Name] {
				byName[info.Name] = info
			}
		}
		for _, name := range present {
			taken[name] = true
		}
	}
	if l.Store != nil {
		stored, err := l.Store.ListSkills(ctx)
		if err != nil {
			return nil, fmt.Errorf("list the server's skills: %w", err)
		}
		for _, s := range stored {
			if !taken[s.Name] {
				byName[s.Name] = Info{Name: s.Name, Description: s.Description, Source: SourceStore}
			}
		}
	}
	out := make([]Info, 0, len(byName))
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		out = append(out, byName[name])
	}
	return out, nil
}

// dirSkills lists the skills of one skills directory, and the names of
// every skill directory there (a directory, not a link, holding a
// SKILL.md), valid or not.
func dirSkills(dir string) (infos []Info, present []string) {
	root, err := workspace.Open(dir)
	if err != nil {
		return nil, nil
	}
	defer root.Close()
	entries, err := fs.ReadDir(root.FS(), ".")
	if err != nil {
		return nil, nil
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		md, err := root.ReadFileMax(path.Join(e.Name(), store.SkillFile), store.MaxSkillBytes)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		present = append(present, e.Name())
		if err != nil {
			continue
		}
		m, err := ParseMeta(md)
		if err != nil || m.Name != e.Name() {
			continue
		}
		infos = append(infos, Info{Name: m.Name, Description: m.Description, Source: SourceDir, Where: dir})
	}
	return infos, present
}

// Files returns the named skill's files by relative slash path, from the
// first source that has it; fs.ErrNotExist when none has.
func (l *Library) Files(ctx context.Context, name string) (map[string][]byte, error) {
	if err := store.ValidateName("name", name); err != nil {
		return nil, err
	}
	for _, d := range l.Dirs {
		files, err := dirFiles(d, name)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		return files, err
	}
	if l.Store != nil {
		s, err := l.Store.GetSkill(ctx, name)
		if err == nil {
			files := make(map[string][]byte, len(s.Files))
			for p, c := range s.Files {
				files[p] = []byte(c)
			}
			return files, nil
		}
		if !errors.Is(err, store.ErrNotFound) {
			return nil, fmt.Errorf("read skill %s from the server: %w", name, err)
		}
	}
	return nil, fmt.Errorf("skill %s: %w", name, fs.ErrNotExist)
}

// dirFiles reads the skill name of the skills directory dir: its regular
// files (links and special files are skipped), within the store's limits.
func dirFiles(dir, name string) (map[string][]byte, error) {
	// A link in place of the skill's directory is skipped, as List skips
	// it: its files would be read from wherever it points.
	if fi, err := os.Lstat(path.Join(dir, name)); err != nil || !fi.IsDir() {
		return nil, fs.ErrNotExist
	}
	if _, err := os.Lstat(path.Join(dir, name, store.SkillFile)); err != nil {
		return nil, fs.ErrNotExist
	}
	root, err := workspace.Open(path.Join(dir, name))
	if err != nil {
		return nil, err
	}
	defer root.Close()
	files := map[string][]byte{}
	total := 0
	err = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		if len(files) == store.MaxSkillFiles {
			return fmt.Errorf("skill %s: more than %d files", name, store.MaxSkillFiles)
		}
		data, err := root.ReadFileMax(p, int64(store.MaxSkillBytes-total))
		if err != nil {
			return fmt.Errorf("skill %s: %w", name, err)
		}
		total += len(data)
		files[p] = data
		return nil
	})
	if err != nil {
		return nil, err
	}
	m, err := ParseMeta(files[store.SkillFile])
	if err != nil {
		return nil, fmt.Errorf("skill %s (%s): %w", name, dir, err)
	}
	if m.Name != name {
		return nil, fmt.Errorf("skill %s (%s): its %s names it %q; the directory and the name must match", name, dir, store.SkillFile, m.Name)
	}
	return files, nil
}

// Materialize copies the named skill into dst's skills/<name>/ (through
// the workspace's confinement) and returns the paths written, relative to
// dst, sorted.
func (l *Library) Materialize(ctx context.Context, name string, dst *workspace.Root) ([]string, error) {
	files, err := l.Files(ctx, name)
	if err != nil {
		return nil, err
	}
	var written []string
	for _, p := range slices.Sorted(maps.Keys(files)) {
		clean, broken := workspace.CheckSlashPath(p)
		if broken != "" || clean != p {
			return written, fmt.Errorf("skill %s: file %q: not a relative path inside the skill", name, p)
		}
		target := path.Join(Dir, name, p)
		if err := dst.WriteFile(target, files[p], 0o644); err != nil {
			return written, fmt.Errorf("materialise skill %s: %w", name, err)
		}
		written = append(written, target)
	}
	return written, nil
}

// Summary is the list of skills for a tool description: one line each.
func Summary(infos []Info) string {
	if len(infos) == 0 {
		return "No skills are available."
	}
	var b bytes.Buffer
	b.WriteString("Available skills:")
	for _, s := range infos {
		fmt.Fprintf(&b, "\n- %s: %s", s.Name, oneLine(s.Description))
	}
	return b.String()
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 200 {
		s = s[:197] + "…"
	}
	return s
}
