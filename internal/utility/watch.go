package utility

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/maestro-run/maestro/internal/gitignore"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/workspace"
)

// DefaultDebounceMS is the file watch debounce when the request gives
// none (wire contract §10.4).
const DefaultDebounceMS = 100

// defaultExcludes are always excluded from file watches, as in the
// reference server.
var defaultExcludes = []string{
	"**/node_modules/**",
	"**/.git/**",
	"**/dist/**",
	"**/build/**",
	"**/.next/**",
	"**/.nuxt/**",
	"**/coverage/**",
	"**/*.log",
	"**/.DS_Store",
	"**/thumbs.db",
}

// watch is one file watch.
type watch struct {
	m     *Manager
	id    string
	owner string
	seq   uint64
	info  protocol.UtilityFileWatchStarted

	root     string // absolute real path
	include  []*gitignore.Glob
	exclude  []*gitignore.Glob
	prune    []*gitignore.Glob // directories whose whole content is excluded
	debounce time.Duration

	started bool // guarded by m.mu: utility_file_watch_started was emitted
	stopped bool // guarded by m.emitMu: utility_file_watch_stopped was emitted

	fsw      *fsnotify.Watcher
	loopDone chan struct{} // closed when the event loop ends (nil: no loop)

	mu      sync.Mutex
	closed  bool
	dirs    map[string]bool // watched directories (absolute)
	pending map[string]*pendingEvent
}

// pendingEvent is a change waiting out the debounce delay.
type pendingEvent struct {
	change protocol.ChangeType
	isDir  bool
	timer  *time.Timer
}

// WatchStart starts a recursive file watch for the connection owner. It
// returns once utility_file_watch_started has been emitted; events follow
// asynchronously. If the watch is stopped while it starts, no
// started message is sent and nothing is left running.
func (m *Manager) WatchStart(ctx context.Context, owner string, req protocol.UtilityFileWatchStart) error {
	w, e := reserve(ctx, m, m.watches, req.WatchID, "utility_file_watch_start", "Utility file watch", func(seq uint64) *watch {
		return &watch{
			m: m, id: req.WatchID, owner: owner, seq: seq,
			dirs: map[string]bool{}, pending: map[string]*pendingEvent{},
		}
	})
	if e != nil {
		return e
	}

	if e := w.configure(req); e != nil {
		m.forgetWatch(w)
		return e
	}
	fsw, err := fsnotify.NewWatcher()
	if err != nil {
		m.forgetWatch(w)
		return errorf(400, "Failed to start file watch %s: %v", req.WatchID, err)
	}
	w.mu.Lock()
	w.fsw = fsw
	closed := w.closed
	w.mu.Unlock()
	if closed {
		fsw.Close() // stopped while it was configured
		return nil
	}
	if err := fsw.Add(w.root); err != nil {
		w.close()
		m.forgetWatch(w)
		return errorf(400, "Failed to start file watch %s: %v", req.WatchID, err)
	}
	w.mu.Lock()
	w.dirs[w.root] = true
	w.mu.Unlock()
	w.addTree(w.root, false)

	m.emitMu.Lock()
	if w.stopped {
		m.emitMu.Unlock()
		w.close()
		return nil
	}
	m.mu.Lock()
	w.started = true
	m.mu.Unlock()
	w.loopDone = make(chan struct{})
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		w.loop()
	}()
	if m.emitFn != nil {
		m.emitFn(w.info)
	}
	m.emitMu.Unlock()
	return nil
}

// configure resolves the root and compiles the patterns of a start request.
func (w *watch) configure(req protocol.UtilityFileWatchStart) *Error {
	m := w.m
	rootDir := req.RootDir
	if rootDir == "" {
		rootDir = m.root.Dir()
	}
	abs, e := m.resolvePath(m.root.Dir(), rootDir)
	if e != nil {
		return e
	}
	fi, err := m.root.Stat(abs)
	switch {
	case errors.Is(err, workspace.ErrOutside):
		return outsideError(abs)
	case err != nil:
		return errorf(404, "Utility file watch root directory does not exist: %s", abs)
	case !fi.IsDir():
		return errorf(400, "Utility file watch root is not a directory: %s", abs)
	}
	w.root = abs
	debounce := DefaultDebounceMS
	if req.DebounceMS != nil {
		debounce = max(0, *req.DebounceMS)
	}
	w.debounce = time.Duration(debounce) * time.Millisecond
	for _, p := range req.IncludePatterns {
		g, err := gitignore.CompileGlob(p)
		if err != nil {
			return errorf(400, "Invalid file watch include pattern %q: %v", p, err)
		}
		w.include = append(w.include, g)
	}
	for _, p := range slices.Concat(defaultExcludes, req.ExcludePatterns) {
		g, err := gitignore.CompileGlob(p)
		if err != nil {
			return errorf(400, "Invalid file watch exclude pattern %q: %v", p, err)
		}
		w.exclude = append(w.exclude, g)
		if prefix, ok := strings.CutSuffix(p, "/**"); ok && prefix != "" && prefix != "**" {
			if pg, err := gitignore.CompileGlob(prefix); err == nil {
				w.prune = append(w.prune, pg)
			}
		}
	}
	w.info = protocol.UtilityFileWatchStarted{
		WatchID:           w.id,
		RootDir:           abs,
		IncludePatterns:   slices.Clone(req.IncludePatterns),
		ExcludePatterns:   slices.Clone(req.ExcludePatterns),
		DebounceMS:        debounce,
		OwnerConnectionID: w.owner,
	}
	return nil
}

// forgetWatch removes w from the active watches.
func (m *Manager) forgetWatch(w *watch) {
	m.mu.Lock()
	if m.watches[w.id] == w {
		delete(m.watches, w.id)
	}
	m.mu.Unlock()
}

// WatchStop stops a file watch with reason "Stopped by controller".
// Stopping an unknown watch is a no-op, as in the reference server.
func (m *Manager) WatchStop(owner string, req protocol.UtilityFileWatchStop) error {
	m.mu.Lock()
	w := m.watches[req.WatchID]
	m.mu.Unlock()
	if w == nil {
		return nil
	}
	if w.owner != "" && w.owner != owner {
		return errorf(403, "Headless file watch %s is owned by another connection", req.WatchID)
	}
	m.stopWatch(w, ReasonWatchStopped)
	return nil
}

// stopWatch ends w, emitting utility_file_watch_stopped once, and waits
// for its event loop.
func (m *Manager) stopWatch(w *watch, reason string) {
	m.forgetWatch(w)
	m.emitMu.Lock()
	already := w.stopped
	w.stopped = true
	if !already && m.emitFn != nil {
		m.emitFn(protocol.UtilityFileWatchStopped{WatchID: w.id, Reason: reason})
	}
	m.emitMu.Unlock()
	w.close()
}

// close releases the watcher and its timers and waits for the event loop.
func (w *watch) close() {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	w.closed = true
	for _, p := range w.pending {
		p.timer.Stop()
	}
	clear(w.pending)
	fsw := w.fsw
	w.mu.Unlock()
	if fsw != nil {
		fsw.Close()
	}
	if w.loopDone != nil {
		<-w.loopDone
	}
}

// loop turns fsnotify events into watch events until the watcher closes.
func (w *watch) loop() {
	defer close(w.loopDone)
	for {
		select {
		case ev, ok := <-w.fsw.Events:
			if !ok {
				return
			}
			w.handle(ev)
		case err, ok := <-w.fsw.Errors:
			if !ok {
				return
			}
			w.m.log.Warn("file watch error", "watch_id", w.id, "err", err)
		}
	}
}

// handle maps one fsnotify event.
func (w *watch) handle(ev fsnotify.Event) {
	path := filepath.Clean(ev.Name)
	if path == w.root {
		return
	}
	switch {
	case ev.Has(fsnotify.Create):
		fi, err := w.m.root.Lstat(path)
		if err != nil {
			return // already gone again
		}
		isDir := fi.IsDir()
		w.queue(path, protocol.ChangeCreate, isDir)
		if isDir {
			if err := w.addDir(path); err == nil {
				// Report what was created inside before the watch existed.
				w.addTree(path, true)
			}
		}
	case ev.Has(fsnotify.Remove):
		w.queue(path, protocol.ChangeDelete, w.forgetDir(path))
	case ev.Has(fsnotify.Rename):
		w.queue(path, protocol.ChangeRename, w.forgetDir(path))
	case ev.Has(fsnotify.Write):
		w.queue(path, protocol.ChangeModify, false)
	}
	// Attribute-only changes (Chmod) are not reported.
}

// addDir starts watching directory path unless its content is excluded.
func (w *watch) addDir(path string) error {
	if w.m.hiddenPath(path) {
		return fs.SkipDir
	}
	rel := w.rel(path)
	for _, g := range w.prune {
		if g.Match(rel) {
			return fs.SkipDir
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return fs.ErrClosed
	}
	if err := w.fsw.Add(path); err != nil {
		w.m.log.Warn("file watch cannot watch a directory", "watch_id", w.id, "dir", path, "err", err)
		return err
	}
	w.dirs[path] = true
	return nil
}

// addTree watches the directories below dir (which is watched already);
// with report, what it finds is reported as created.
//
// The directory is listed through the workspace root, opened without
// blocking: a FIFO or a link out of the workspace swapped in for it is
// not listed.
func (w *watch) addTree(dir string, report bool) {
	d, err := w.m.root.OpenDir(dir)
	if err != nil {
		return
	}
	entries, err := d.ReadDir()
	d.Close()
	if err != nil {
		return
	}
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		isDir := e.IsDir() // symbolic links are not followed
		if report {
			w.queue(p, protocol.ChangeCreate, isDir)
		}
		if isDir && w.addDir(p) == nil {
			w.addTree(p, report)
		}
	}
}

// forgetDir stops watching path and the directories below it if it was a
// watched directory, and reports whether it was.
func (w *watch) forgetDir(path string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.dirs[path] {
		return false
	}
	prefix := path + string(filepath.Separator)
	for d := range w.dirs {
		if d == path || strings.HasPrefix(d, prefix) {
			delete(w.dirs, d)
			if !w.closed {
				_ = w.fsw.Remove(d) // already gone when the directory was removed
			}
		}
	}
	return true
}

// rel returns path relative to the watch root, slash-separated.
func (w *watch) rel(path string) string {
	rel, err := filepath.Rel(w.root, path)
	if err != nil {
		return path
	}
	return filepath.ToSlash(rel)
}

// included reports whether a change at rel is reported.
func (w *watch) included(rel string) bool {
	for _, g := range w.exclude {
		if g.Match(rel) {
			return false
		}
	}
	if len(w.include) == 0 {
		return true
	}
	for _, g := range w.include {
		if g.Match(rel) {
			return true
		}
	}
	return false
}

// queue records a change, merging it with one pending for the same path,
// and emits it after the debounce delay.
func (w *watch) queue(path string, change protocol.ChangeType, isDir bool) {
	if !w.included(w.rel(path)) || w.m.hiddenPath(path) {
		return
	}
	if w.debounce == 0 {
		w.emitEvent(path, change, isDir)
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	if p := w.pending[path]; p != nil {
		merged, keep := mergeChange(p.change, change)
		if !keep {
			p.timer.Stop()
			delete(w.pending, path)
			return
		}
		p.change, p.isDir = merged, p.isDir || isDir
		p.timer.Reset(w.debounce)
		return
	}
	p := &pendingEvent{change: change, isDir: isDir}
	p.timer = time.AfterFunc(w.debounce, func() { w.fire(path, p) })
	w.pending[path] = p
}

// fire emits a pending change whose delay has passed.
func (w *watch) fire(path string, p *pendingEvent) {
	w.mu.Lock()
	if w.closed || w.pending[path] != p {
		w.mu.Unlock()
		return
	}
	delete(w.pending, path)
	change, isDir := p.change, p.isDir
	w.mu.Unlock()
	w.emitEvent(path, change, isDir)
}

// mergeChange merges a change into the one pending for the same path;
// keep is false when together they amount to nothing.
func mergeChange(prev, next protocol.ChangeType) (merged protocol.ChangeType, keep bool) {
	switch {
	case prev == protocol.ChangeCreate && next == protocol.ChangeModify:
		return protocol.ChangeCreate, true
	case prev == protocol.ChangeCreate && (next == protocol.ChangeDelete || next == protocol.ChangeRename):
		return "", false
	case (prev == protocol.ChangeDelete || prev == protocol.ChangeRename) && next == protocol.ChangeCreate:
		return protocol.ChangeModify, true
	case prev == protocol.ChangeCreate && next == protocol.ChangeCreate:
		return protocol.ChangeCreate, true
	}
	return next, true
}

// emitEvent emits one watch event, unless the watch has stopped.
func (w *watch) emitEvent(path string, change protocol.ChangeType, isDir bool) {
	rel, err := filepath.Rel(w.root, path)
	if err != nil {
		return
	}
	m := w.m
	m.emitMu.Lock()
	defer m.emitMu.Unlock()
	if w.stopped || m.emitFn == nil {
		return
	}
	m.emitFn(protocol.UtilityFileWatchEvent{
		WatchID:      w.id,
		ChangeType:   change,
		Path:         path,
		RelativePath: rel,
		Timestamp:    time.Now().UnixMilli(),
		IsDirectory:  isDir,
	})
}
