//go:build !linux

package index

import (
	"context"
	"errors"
	"io/fs"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/maestro-run/maestro/internal/gitignore"
	"github.com/maestro-run/maestro/internal/workspace/walk"
)

// scan lists the subtree at rel (its parent, nil for the root, is
// already indexed), watching each directory before it is listed when
// watch is set (else the caller watches the subtree after, watchTree).
func (x *Index) scan(ctx context.Context, rel string, parent *Dir, watch bool) (*Dir, error) {
	s := &scanner{x: x, nodes: map[string]*Dir{}, inline: watch}
	top := &Dir{name: path.Base(rel), rel: rel, parent: parent, wd: -1}
	s.watch(top)
	err := walk.Walk(ctx, x.root, rel, func() walk.Worker { return &scanWorker{s: s} })
	if err != nil {
		s.unwatch()
		return nil, err
	}
	for _, d := range s.nodes {
		if d.failed {
			x.failed[d] = true
		}
		if d.parent != nil && d != top {
			d.parent.dirs = append(d.parent.dirs, d)
		}
	}
	for _, d := range s.nodes {
		slices.SortFunc(d.dirs, func(a, b *Dir) int { return strings.Compare(a.name, b.name) })
	}
	return top, nil
}

// scanner collects the directories of one scan.
type scanner struct {
	x      *Index
	inline bool // add the watches as directories are found
	mu     sync.Mutex
	nodes  map[string]*Dir // by rel
}

// watch adds the watches of dirs (before they are listed, so that no
// change after their listing is missed) and records the directories. The
// system calls run outside s.mu, in parallel between workers. When a watch
// cannot be added, the index stops watching.
func (s *scanner) watch(dirs ...*Dir) {
	x := s.x
	s.mu.Lock()
	w := x.w
	s.mu.Unlock()
	limit := false
	if w != nil && s.inline {
		for _, d := range dirs {
			wd, err := w.add(path.Join(x.root.Dir(), d.rel), -1)
			if err != nil {
				// Not listable either (the listing marks it failed), or
				// out of watches.
				limit = limit || errors.Is(err, errWatchLimit)
				continue
			}
			d.wd = wd
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range dirs {
		s.nodes[d.rel] = d
		if x.w != nil && d.wd >= 0 {
			x.byWD[d.wd] = d
		}
	}
	if limit {
		x.stopWatching()
	}
}

// unwatch removes the watches of a scan that failed.
func (s *scanner) unwatch() {
	for _, d := range s.nodes {
		if d.wd >= 0 && s.x.w != nil {
			s.x.w.remove(d.wd)
			delete(s.x.byWD, d.wd)
		}
	}
}

type scanWorker struct {
	s     *scanner
	files strings.Builder
	links strings.Builder
}

// List records the entries of one directory and queues its
// subdirectories. A subdirectory's node is made (and watched) here, before
// it is listed; one that cannot be opened stays marked failed.
func (w *scanWorker) List(wd *walk.Dir, entries []fs.DirEntry, rules *gitignore.Stack, err error) []walk.Task {
	if wd == nil {
		return nil // its node, made by its parent, stays failed
	}
	s := w.s
	s.mu.Lock()
	d := s.nodes[wd.Rel()]
	s.mu.Unlock()
	d.rules = rules
	d.failed = err != nil
	w.files.Reset()
	w.links.Reset()
	var tasks []walk.Task
	var subs []*Dir
	for _, e := range entries {
		switch entryKind(d, e) {
		case kindFile:
			w.files.WriteString(e.Name())
			w.files.WriteByte(sep)
		case kindLink:
			w.links.WriteString(e.Name())
			w.links.WriteByte(sep)
		case kindDir:
			name := e.Name()
			subs = append(subs, &Dir{name: name, rel: path.Join(d.rel, name), parent: d, rules: rules, failed: true, wd: -1})
			tasks = append(tasks, walk.Task{Name: name, IsDir: true, Rules: rules})
		}
	}
	d.setFiles(w.files.String(), s.inline)
	d.links = w.links.String()
	if len(subs) > 0 {
		s.watch(subs...)
	}
	return tasks
}

// File implements walk.Worker; files are recorded as listed.
func (w *scanWorker) File(walk.Task) {}

// Done implements walk.Worker.
func (w *scanWorker) Done() {}
