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
	"path"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v4"

	"github.com/maestro-run/maestro/internal/store"
	"github.com/maestro-run/maestro/internal/workspace"
	"github.com/maestro-run/maestro/internal/yamlnode"
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
// first line "---" and the next "---" line. Name and description are
// required. Errors name SKILL.md and, where the YAML has one, the line
// and column in the file.
func ParseMeta(skillMD []byte) (Meta, error) {
	return parseMeta(store.SkillFile, skillMD)
}

// parseMeta is ParseMeta with file naming the SKILL.md in errors. A byte
// order mark and spaces after a --- are ignored, as editors leave them.
func parseMeta(file string, skillMD []byte) (Meta, error) {
	text := strings.TrimPrefix(strings.ReplaceAll(string(skillMD), "\r\n", "\n"), "\ufeff")
	lines := strings.Split(text, "\n")
	if strings.TrimRight(lines[0], " \t") != "---" {
		return Meta{}, errors.New(file + ": expected YAML front matter between --- lines at the top (name: and description:)")
	}
	end := slices.IndexFunc(lines[1:], func(l string) bool { return strings.TrimRight(l, " \t") == "---" })
	if end < 0 {
		return Meta{}, errors.New(file + ": the front matter has no closing --- line")
	}
	// The line "---" stays as an empty line, so the YAML's lines are the
	// file's.
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte("\n"+strings.Join(lines[1:end+1], "\n")), &doc); err != nil {
		return Meta{}, yamlError(file, err)
	}
	at := func(n *yaml.Node, format string, args ...any) error {
		return fmt.Errorf("%s:%d:%d: front matter: "+format, append([]any{file, n.Line, n.Column}, args...)...)
	}
	var m Meta
	var others []*yaml.Node // the keys of other fields
	if len(doc.Content) > 0 {
		root := doc.Content[0]
		if root.Kind == yaml.ScalarNode && root.ShortTag() == "!!null" {
			root = &yaml.Node{Kind: yaml.MappingNode}
		}
		if root.Kind != yaml.MappingNode {
			return Meta{}, at(root, "expected name: and description: fields, found %s", yamlnode.Describe(root))
		}
		for i := 0; i+1 < len(root.Content); i += 2 {
			k, v := root.Content[i], root.Content[i+1]
			var dst *string
			switch k.Value {
			case "name":
				dst = &m.Name
			case "description":
				dst = &m.Description
			default:
				others = append(others, k) // license, metadata, …: the skill's own
				continue
			}
			if v.Kind != yaml.ScalarNode {
				return Meta{}, at(v, "%s: expected a string, found %s", k.Value, yamlnode.Describe(v))
			}
			if v.ShortTag() != "!!null" {
				*dst = strings.TrimSpace(v.Value)
			}
			if k.Value == "name" && *dst != "" {
				if err := store.ValidateName("name", *dst); err != nil {
					return Meta{}, at(v, "%s", err)
				}
			}
		}
	}
	for _, f := range []struct {
		key   string
		value string
	}{{"name", m.Name}, {"description", m.Description}} {
		if f.value != "" {
			continue
		}
		for _, k := range others {
			if yamlnode.Suggest(k.Value, []string{f.key}) != "" {
				return Meta{}, at(k, "%s is required; found %s: (did you mean %s:?)", f.key, k.Value, f.key)
			}
		}
		return Meta{}, fmt.Errorf("%s front matter: %s is required", file, f.key)
	}
	return m, nil
}

// yamlError words a YAML syntax error of a front matter with its line and
// column in file.
func yamlError(file string, err error) error {
	var one *yaml.LoadError
	if list, ok := errors.AsType[*yaml.LoadErrors](err); ok && len(list.Errors) > 0 {
		one = list.Errors[0]
	} else if e, ok := errors.AsType[*yaml.LoadError](err); ok {
		one = e
	}
	if one == nil || one.Mark.Line <= 0 {
		return fmt.Errorf("%s front matter: %w", file, err)
	}
	msg := strings.TrimPrefix(one.Message, "yaml: ")
	if c := one.ContextMark; one.ContextMsg != "" && c.Line > 0 && c != one.Mark {
		msg += fmt.Sprintf(" (%s started at %d:%d)", one.ContextMsg, c.Line, c.Column)
	}
	return fmt.Errorf("%s:%d:%d: front matter: YAML syntax error: %s", file, one.Mark.Line, one.Mark.Column, msg)
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
	// Root, if set, is the workspace: a directory of Dirs below it (the
	// project's .maestro/skills) is reached from Root without following
	// a symbolic link at any component, since the agent can write there
	// and plant one (`.maestro/skills -> ~/.claude/skills`). Dirs
	// elsewhere (the user's) are opened as given.
	Root string
	// Store, if set, holds the server's skills.
	Store Store
}

// DefaultLibrary returns the skills of a run in workdir (DefaultDirs, with Root
// workdir): the project's, then the user's.
func DefaultLibrary(workdir, home string) *Library {
	return &Library{Dirs: DefaultDirs(workdir, home), Root: workdir}
}

// open opens the skills directory dir: from Root following no link when
// dir lies below it, else as given. A link on the way yields an error
// matching workspace.ErrOutside.
func (l *Library) open(dir string) (*workspace.Dir, error) {
	if l.Root != "" {
		root := filepath.Clean(l.Root)
		if rel, ok := workspace.Within(root, filepath.Clean(dir)); ok {
			top, err := workspace.OpenTrusted(root)
			if err != nil {
				return nil, err
			}
			defer top.Close()
			return top.OpenPath(filepath.ToSlash(rel))
		}
	}
	return workspace.OpenTrusted(dir)
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
		infos, present := l.dirSkills(d)
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

// Problems says why each skill directory that List leaves out is left
// out, by name: the error ReadSkill gives for it (a SKILL.md that is
// malformed, a link, or names another skill). Only a directory that List
// would have taken counts: one hidden by an earlier source's skill of its
// name is not read. A user who wrote a skill with a mistake is told so,
// since the model, not offered it, never asks ReadSkill for it.
func (l *Library) Problems() []error {
	var out []error
	taken := map[string]bool{}
	for _, d := range l.Dirs {
		if sd, err := l.open(d); errors.Is(err, workspace.ErrOutside) {
			out = append(out, fmt.Errorf("skills directory %s leads through a symbolic link: its skills are not read (make .maestro and .maestro/skills real directories)", d))
			continue
		} else if err == nil {
			sd.Close()
		}
		infos, present := l.dirSkills(d)
		for _, name := range present {
			if taken[name] || slices.ContainsFunc(infos, func(i Info) bool { return i.Name == name }) {
				continue
			}
			if _, err := l.dirFiles(d, name); err != nil {
				out = append(out, err)
			} else {
				out = append(out, fmt.Errorf("skill %s: %s is not a skill ReadSkill can offer", name, path.Join(d, name)))
			}
		}
		for _, name := range present {
			taken[name] = true
		}
	}
	return out
}

// dirSkills lists the skills of one skills directory, and the names of
// every skill directory there (a directory, not a link, holding a
// SKILL.md), valid or not.
func (l *Library) dirSkills(dir string) (infos []Info, present []string) {
	d, err := l.open(dir)
	if err != nil {
		return nil, nil
	}
	defer d.Close()
	entries, err := d.ReadDir()
	if err != nil {
		return nil, nil
	}
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		sub, err := d.OpenDir(e.Name())
		if err != nil {
			continue // a link swapped in since the listing
		}
		// Present as Files finds it: a SKILL.md of any kind (a link to a
		// file is one, and Files refuses it, so it is not listed).
		if _, err := sub.Lstat(store.SkillFile); err == nil {
			present = append(present, e.Name())
			md, _, err := sub.ReadFile(store.SkillFile, nil, store.MaxSkillBytes)
			if m, perr := ParseMeta(md); err == nil && perr == nil && m.Name == e.Name() {
				infos = append(infos, Info{Name: m.Name, Description: m.Description, Source: SourceDir, Where: dir})
			}
		}
		sub.Close()
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
		files, err := l.dirFiles(d, name)
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
// Every directory is opened from the one above it without following a
// link, so a link swapped in after a check is not followed either.
func (l *Library) dirFiles(dir, name string) (map[string][]byte, error) {
	d, err := l.open(dir)
	if err != nil {
		return nil, fs.ErrNotExist
	}
	defer d.Close()
	// A link in place of the skill's directory is skipped, as List skips
	// it: its files would be read from wherever it points.
	skill, err := d.OpenDir(name)
	if err != nil {
		return nil, fs.ErrNotExist
	}
	defer skill.Close()
	file := path.Join(dir, name, store.SkillFile)
	fi, err := skill.Lstat(store.SkillFile)
	if err != nil {
		return nil, fs.ErrNotExist
	}
	if !fi.Mode().IsRegular() {
		// The walk below skips it like any link: say so, rather than
		// that the file has no front matter.
		return nil, fmt.Errorf("skill %s: %s is %s, not a regular file: a skill's files are read only when they are regular files (copy the file in place of the link)",
			name, file, workspace.KindOf(fi.Mode()))
	}
	files := map[string][]byte{}
	total := 0
	var walk func(d *workspace.Dir, prefix string, depth int) error
	walk = func(d *workspace.Dir, prefix string, depth int) error {
		if depth > workspace.DefaultWalkDepth {
			return fmt.Errorf("skill %s: %s is deeper than %d levels", name, path.Join(dir, name, prefix), workspace.DefaultWalkDepth)
		}
		entries, err := d.ReadDir()
		if err != nil {
			return fmt.Errorf("skill %s: %w", name, err)
		}
		slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
		for _, e := range entries {
			p := path.Join(prefix, e.Name())
			switch {
			case e.IsDir():
				sub, err := d.OpenDir(e.Name())
				if err != nil {
					continue // a link swapped in since the listing
				}
				err = walk(sub, p, depth+1)
				sub.Close()
				if err != nil {
					return err
				}
				continue
			case !e.Type().IsRegular():
				continue
			case len(files) == store.MaxSkillFiles:
				return fmt.Errorf("skill %s: %s holds more than %d files, the limit of one skill", name, path.Join(dir, name), store.MaxSkillFiles)
			}
			data, _, err := d.ReadFile(e.Name(), nil, int64(store.MaxSkillBytes-total))
			if errors.Is(err, workspace.ErrTooLarge) {
				// The limit is the skill's, not the file's: the error's is
				// what was left of it.
				return fmt.Errorf("skill %s: the files of %s come to more than %d bytes (at %s), the limit of one skill", name, path.Join(dir, name), store.MaxSkillBytes, p)
			}
			if err != nil {
				return fmt.Errorf("skill %s: %w", name, err)
			}
			total += len(data)
			files[p] = data
		}
		return nil
	}
	if err := walk(skill, "", 1); err != nil {
		return nil, err
	}
	m, err := parseMeta(file, files[store.SkillFile])
	if err != nil {
		return nil, fmt.Errorf("skill %s: %w", name, err)
	}
	if m.Name != name {
		return nil, fmt.Errorf("skill %s: %s names it %q; the directory and the name must match", name, file, m.Name)
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
