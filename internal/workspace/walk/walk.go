// Package walk is the parallel walk of a workspace subtree that honours
// .gitignore files, and the bounded "best N" set its callers rank results
// in. The Grep tool and utility_file_search both walk this way; each
// decides per directory which entries to descend into or visit.
//
// Directories are opened relative to their parent (workspace.Dir), never
// by path, so a directory swapped for a symbolic link during the walk is
// not followed. An open directory is shared by the queued tasks of its
// entries and closed by the last one to finish.
package walk

import (
	"context"
	"io/fs"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/maestro-run/maestro/internal/gitignore"
	"github.com/maestro-run/maestro/internal/workspace"
)

// maxIgnoreFile bounds the .gitignore file read in each directory.
const maxIgnoreFile = 1 << 20

// Dir is an open directory of the walk.
type Dir struct {
	*workspace.Dir
	mu   sync.Mutex
	refs int
}

func (d *Dir) acquire(n int) {
	d.mu.Lock()
	d.refs += n
	d.mu.Unlock()
}

// release drops one reference; the last one closes the directory.
func (d *Dir) release() {
	d.mu.Lock()
	d.refs--
	last := d.refs == 0
	d.mu.Unlock()
	if last {
		d.Dir.Close()
	}
}

// Task is an entry queued by Worker.List: a directory to list, or a file
// to hand to Worker.File.
type Task struct {
	Dir   *Dir // the directory holding the entry; set by the walk
	Name  string
	IsDir bool
	// Rules are the .gitignore rules in effect in Dir; for a directory
	// task, the walk adds those of its own .gitignore when it lists it.
	Rules *gitignore.Stack
}

// Worker is the visitor of one walk goroutine; it may keep buffers and
// partial results between calls, as no two calls of one Worker overlap.
type Worker interface {
	// List sees the entries of one directory, with the rules in effect in
	// it (its own .gitignore included), and returns the tasks to queue. err
	// is not nil when the directory could not be opened (d is then nil) or
	// read (entries then holds what was read).
	List(d *Dir, entries []fs.DirEntry, rules *gitignore.Stack, err error) []Task
	// File visits a file task.
	File(t Task)
	// Done is called once when the goroutine has no more work.
	Done()
}

// Walk lists the directory base (slash-separated, relative to root) and
// every directory below it that the workers queue, visiting the queued
// files, on GOMAXPROCS goroutines with a Worker each. It returns when all
// work is done, or when ctx is cancelled (with its error); an error
// opening base itself is returned as is.
func Walk(ctx context.Context, root *workspace.Root, base string, newWorker func() Worker) error {
	top, err := root.OpenDir(base)
	if err != nil {
		return err
	}
	// The rules in effect in base, its own .gitignore and those of its
	// ancestors included.
	rules := gitignore.New(root.FS()).Dir(base)
	q := newQueue()
	q.active = 1 // the top directory, listed below, before workers may finish
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			w := newWorker()
			defer w.Done()
			for {
				t, ok := q.pop()
				if !ok {
					return
				}
				switch {
				case ctx.Err() != nil:
					t.Dir.release()
					q.close()
				case t.IsDir:
					listTask(q, w, t)
				default:
					w.File(t)
					t.Dir.release()
				}
				q.done()
			}
		})
	}
	w := newWorker()
	list(q, w, &Dir{Dir: top, refs: 1}, rules, false)
	w.Done()
	q.done()
	wg.Wait()
	return ctx.Err()
}

// listTask opens the directory of a task and lists it.
func listTask(q *queue, w Worker, t Task) {
	sub, err := t.Dir.OpenDir(t.Name)
	t.Dir.release()
	if err != nil {
		w.List(nil, nil, t.Rules, err)
		return
	}
	list(q, w, &Dir{Dir: sub, refs: 1}, t.Rules, true)
}

// list hands the entries of d to the worker and queues the tasks it
// returns, then drops the caller's reference to d. rules are those in
// effect in d, without those of d's own .gitignore when loadOwn is set.
func list(q *queue, w Worker, d *Dir, rules *gitignore.Stack, loadOwn bool) {
	defer d.release()
	entries, err := d.ReadDir()
	if loadOwn {
		for _, e := range entries {
			if e.Name() == gitignore.FileName && e.Type().IsRegular() {
				if data, _, err := d.ReadFile(gitignore.FileName, nil, maxIgnoreFile); err == nil {
					rules = rules.Push(gitignore.Parse(d.Rel(), data))
				}
				break
			}
		}
	}
	tasks := w.List(d, entries, rules, err)
	if len(tasks) == 0 {
		return
	}
	for i := range tasks {
		tasks[i].Dir = d
	}
	d.acquire(len(tasks))
	q.push(tasks)
}

// queue is a LIFO work queue that knows when all work is done: when it is
// empty and no task is being processed (processing may add tasks).
type queue struct {
	mu     sync.Mutex
	cond   sync.Cond
	tasks  []Task
	active int
	closed bool
}

func newQueue() *queue {
	q := &queue{}
	q.cond.L = &q.mu
	return q
}

func (q *queue) push(ts []Task) {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		for _, t := range ts {
			t.Dir.release()
		}
		return
	}
	q.tasks = append(q.tasks, ts...)
	q.mu.Unlock()
	if len(ts) == 1 {
		q.cond.Signal()
	} else {
		q.cond.Broadcast()
	}
}

// pop returns the next task, or false when all work is done or the queue
// was closed.
func (q *queue) pop() (Task, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.tasks) == 0 && q.active > 0 && !q.closed {
		q.cond.Wait()
	}
	if len(q.tasks) == 0 || q.closed {
		return Task{}, false
	}
	t := q.tasks[len(q.tasks)-1]
	q.tasks = q.tasks[:len(q.tasks)-1]
	q.active++
	return t, true
}

// done marks a popped task (or the top directory) finished.
func (q *queue) done() {
	q.mu.Lock()
	q.active--
	finished := q.active == 0 && len(q.tasks) == 0
	q.mu.Unlock()
	if finished {
		q.cond.Broadcast()
	}
}

// close stops the queue; remaining tasks are dropped (their directories
// released).
func (q *queue) close() {
	q.mu.Lock()
	q.closed = true
	rest := q.tasks
	q.tasks = nil
	q.mu.Unlock()
	q.cond.Broadcast()
	for _, t := range rest {
		t.Dir.release()
	}
}

// Listed is a directory (slash-separated, relative to the root) and the
// names of the files in it to visit, chosen beforehand (from the
// workspace index, internal/workspace/index).
type Listed struct {
	Rel   string
	Names []string
}

// Files visits the listed files on up to GOMAXPROCS goroutines with a
// Worker each, as Walk visits the files its workers queue: each directory
// is opened once and its files opened relative to it. A directory that
// cannot be opened is reported to the worker's List with the error (and
// a nil Dir). Files returns when all are visited, or when ctx is
// cancelled (with its error).
func Files(ctx context.Context, root *workspace.Root, dirs []Listed, newWorker func() Worker) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range max(1, min(runtime.GOMAXPROCS(0), len(dirs))) {
		wg.Go(func() {
			w := newWorker()
			defer w.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(dirs) || ctx.Err() != nil {
					return
				}
				l := dirs[i]
				od, err := root.OpenDir(l.Rel)
				if err != nil {
					w.List(nil, nil, nil, err)
					continue
				}
				d := &Dir{Dir: od, refs: 1}
				for _, name := range l.Names {
					if ctx.Err() != nil {
						break
					}
					w.File(Task{Dir: d, Name: name})
				}
				d.release()
			}
		})
	}
	wg.Wait()
	return ctx.Err()
}
