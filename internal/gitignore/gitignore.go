// Package gitignore decides which files a tree walk should skip, with the
// semantics of git's .gitignore files:
//
//   - blank lines and lines starting with `#` are ignored; `\#` and `\!`
//     start a pattern with a literal `#` or `!`;
//   - trailing spaces are dropped unless escaped (`\ `);
//   - `!` negates: a later match re-includes what an earlier one ignored,
//     though nothing inside an ignored directory can be re-included;
//   - a trailing `/` makes a pattern match directories only;
//   - a pattern with a `/` at its start or in its middle is anchored to the
//     directory of its .gitignore file; without one it matches a name at
//     any depth below that directory;
//   - wildcards are those of Glob (`*`, `?`, `[...]`, `**`, `\`);
//   - a .gitignore file applies to its own directory and below, and its
//     rules override those of the files above it; within one file the last
//     matching rule wins;
//   - `.git` itself is always ignored, and .git/info/exclude at the top
//     applies like a top-level .gitignore.
//
// Rules and Stack are the building blocks (parse one file; the rules in
// effect in one directory); Matcher loads files lazily from an fs.FS and
// answers for any path; Walk walks a tree skipping what is ignored.
package gitignore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"sync"

	"github.com/maestro-run/maestro/internal/workspace"
)

// FileName is the name of the files holding ignore rules.
const FileName = ".gitignore"

// Rules are the patterns of one ignore file.
type Rules struct {
	base  string // slash-separated directory the patterns are relative to; "" for the top
	rules []rule
}

type rule struct {
	glob     *Glob
	negate   bool
	dirOnly  bool
	basename bool // no slash in the pattern: match the last name at any depth
}

// Parse parses the content of an ignore file found in directory base
// (slash-separated, relative to the tree walked; "" or "." for its top).
// Lines that are not valid patterns are skipped, as git does.
func Parse(base string, content []byte) *Rules {
	base = strings.Trim(path.Clean("/"+base), "/")
	rs := &Rules{base: base}
	for line := range bytes.Lines(content) {
		if r, ok := parseLine(string(line)); ok {
			rs.rules = append(rs.rules, r)
		}
	}
	return rs
}

// Base returns the directory the rules apply to ("" for the top).
func (rs *Rules) Base() string { return rs.base }

// Len returns the number of patterns.
func (rs *Rules) Len() int { return len(rs.rules) }

func parseLine(line string) (rule, bool) {
	line = strings.TrimSuffix(line, "\n")
	line = strings.TrimSuffix(line, "\r")
	line = trimTrailingSpaces(line)
	if line == "" || line[0] == '#' {
		return rule{}, false
	}
	var r rule
	if line[0] == '!' {
		r.negate = true
		line = line[1:]
	}
	if strings.HasSuffix(line, "/") && !strings.HasSuffix(line, `\/`) {
		r.dirOnly = true
		line = strings.TrimRight(line, "/")
	}
	if line == "" {
		return rule{}, false
	}
	if !strings.Contains(line, "/") {
		r.basename = true
	}
	g, err := CompileGlob(line)
	if err != nil {
		return rule{}, false
	}
	r.glob = g
	return r, true
}

// trimTrailingSpaces drops trailing spaces that are not escaped by a
// backslash, and the backslash of an escaped one.
func trimTrailingSpaces(s string) string {
	end := len(s)
	for end > 0 && s[end-1] == ' ' {
		// Count the backslashes before this space.
		n := 0
		for i := end - 2; i >= 0 && s[i] == '\\'; i-- {
			n++
		}
		if n%2 == 1 {
			// Escaped: keep "\ " (the glob reads it as a literal space).
			break
		}
		end--
	}
	return s[:end]
}

// match reports (ignored, decided) for a path relative to the rules' base.
func (rs *Rules) match(rel string, isDir bool) (ignored, decided bool) {
	name := rel
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		name = rel[i+1:]
	}
	for i := len(rs.rules) - 1; i >= 0; i-- {
		r := &rs.rules[i]
		if r.dirOnly && !isDir {
			continue
		}
		var ok bool
		if r.basename {
			seg := &r.glob.segs[0]
			ok = seg.kind == segStarStar || seg.match(name)
		} else {
			ok = r.glob.Match(rel)
		}
		if ok {
			return !r.negate, true
		}
	}
	return false, false
}

// Stack is the set of rules in effect inside one directory: the rules of
// its own ignore file and those of its ancestors. A nil *Stack has no rules
// (it still ignores .git). Stacks are immutable and safe for concurrent use.
type Stack struct {
	parent *Stack
	rules  *Rules
}

// Push returns the stack for a subdirectory that has the given rules
// (nil or empty rules return s itself).
func (s *Stack) Push(rs *Rules) *Stack {
	if rs == nil || len(rs.rules) == 0 {
		return s
	}
	return &Stack{parent: s, rules: rs}
}

// Match reports whether the entry at p (slash-separated, relative to the
// top of the tree) is ignored by its own name, given the rules of the
// directory holding it. It does not look at p's ancestors: walkers call it
// for each entry and do not descend into ignored directories.
func (s *Stack) Match(p string, isDir bool) bool {
	name := p
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		name = p[i+1:]
	}
	if name == ".git" {
		return true
	}
	for st := s; st != nil; st = st.parent {
		rel := p
		if b := st.rules.base; b != "" {
			var ok bool
			rel, ok = strings.CutPrefix(p, b+"/")
			if !ok {
				continue
			}
		}
		if ignored, decided := st.rules.match(rel, isDir); decided {
			return ignored
		}
	}
	return false
}

// Matcher answers whether paths of a tree are ignored, loading ignore
// files from the tree as needed. It is safe for concurrent use.
type Matcher struct {
	fsys fs.FS

	mu     sync.Mutex
	stacks map[string]*Stack // directory ("." for the top) → rules in effect inside it
}

// New returns a Matcher for the tree at the root of fsys.
func New(fsys fs.FS) *Matcher {
	return &Matcher{fsys: fsys, stacks: map[string]*Stack{}}
}

// Dir returns the rules in effect inside directory dir (slash-separated,
// relative to the top of the tree; "." or "" for the top), loading the
// ignore files of dir and its ancestors.
func (m *Matcher) Dir(dir string) *Stack {
	dir = path.Clean("/" + dir)[1:]
	if dir == "" {
		dir = "."
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.dirLocked(dir)
}

func (m *Matcher) dirLocked(dir string) *Stack {
	if st, ok := m.stacks[dir]; ok {
		return st
	}
	var st *Stack
	if dir == "." {
		if data, err := readIgnoreFile(m.fsys, ".git/info/exclude"); err == nil {
			st = st.Push(Parse("", data))
		}
	} else {
		st = m.dirLocked(path.Dir(dir))
	}
	if data, err := readIgnoreFile(m.fsys, path.Join(dir, FileName)); err == nil {
		st = st.Push(Parse(dir, data))
	}
	m.stacks[dir] = st
	return st
}

// MaxFileBytes bounds the ignore files read: a larger one is not read and
// its rules do not apply.
const MaxFileBytes = 1 << 20

// readIgnoreFile reads the ignore file name of fsys if it is a regular file
// of at most MaxFileBytes; anything else (a FIFO, a device, a huge file)
// is an error, so that a planted file neither hangs a walk nor fills
// memory. fsys must open without blocking for a FIFO planted at name to be
// harmless (workspace.Root.FS does).
func readIgnoreFile(fsys fs.FS, name string) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return workspace.ReadRegular(f, name, MaxFileBytes)
}

// Ignored reports whether the file or directory at p (slash-separated,
// relative to the top of the tree) is ignored, either by its own name or
// because a directory above it is.
func (m *Matcher) Ignored(p string, isDir bool) bool {
	p = path.Clean("/" + p)[1:]
	if p == "" {
		return false
	}
	dir := "."
	for i := 0; i < len(p); i++ {
		if p[i] != '/' {
			continue
		}
		sub := p[:i]
		if m.Dir(dir).Match(sub, true) {
			return true
		}
		dir = sub
	}
	return m.Dir(dir).Match(p, isDir)
}

// Walk walks the tree rooted at root (slash-separated, relative to the top
// of fsys, where the top-level .gitignore lives) in lexical order, like
// fs.WalkDir, but skips .git and every entry the ignore files ignore; the
// ignore files of root's ancestors apply too. root itself is always
// visited, even if it is ignored, as when it is named explicitly.
// Symbolic links are reported, not followed. Walk stops with ctx.Err()
// when ctx is cancelled.
func Walk(ctx context.Context, fsys fs.FS, root string, fn fs.WalkDirFunc) error {
	root = path.Clean("/" + root)[1:]
	if root == "" {
		root = "."
	}
	m := New(fsys)
	info, err := fs.Stat(fsys, root)
	if err != nil {
		err = fn(root, nil, err)
	} else {
		err = walkDir(ctx, fsys, m, root, fs.FileInfoToDirEntry(info), fn)
	}
	if errors.Is(err, fs.SkipDir) || errors.Is(err, fs.SkipAll) {
		return nil
	}
	return err
}

func walkDir(ctx context.Context, fsys fs.FS, m *Matcher, dir string, d fs.DirEntry, fn fs.WalkDirFunc) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := fn(dir, d, nil); err != nil || !d.IsDir() {
		if errors.Is(err, fs.SkipDir) && d.IsDir() {
			err = nil
		}
		return err
	}
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		if err = fn(dir, d, fmt.Errorf("read directory %s: %w", dir, err)); err != nil {
			if errors.Is(err, fs.SkipDir) {
				err = nil
			}
			return err
		}
	}
	st := m.Dir(dir)
	for _, e := range entries {
		p := path.Join(dir, e.Name())
		if st.Match(p, e.IsDir()) {
			continue
		}
		if err := walkDir(ctx, fsys, m, p, e, fn); err != nil {
			if errors.Is(err, fs.SkipDir) && !e.IsDir() {
				// SkipDir on a file skips the rest of its directory.
				return nil
			}
			return err
		}
	}
	return nil
}
