package queue

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/maestro-run/maestro/internal/blobstore"
	"github.com/maestro-run/maestro/internal/engine"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/staging"
	"github.com/maestro-run/maestro/internal/store"
	"github.com/maestro-run/maestro/internal/taskdir"
	"github.com/maestro-run/maestro/internal/workspace"
)

// A job's files in an artifact store (EngineRunnerConfig.Artifacts,
// docs/scale-out.md, "Artifacts"): the job directory (JobDir) on the
// worker is a scratch copy. At claim the worker adopts the files staged
// with the task (blobstore.UploadPrefix → <job>/work/input/) and
// materialises <job>/work/ and <job>/state/ into the scratch directory
// (what an earlier attempt, on any machine, produced); at the end of each
// movement (transition, question, completion) and when the attempt ends it
// syncs output/, subtasks/ and state/ (logs) back. Both directions copy
// only files whose size or SHA-256 differ, and check each copy.

// syncedDirs are the directories of work/ synced back, mirrored (a file
// the agent removed is removed from the store).
var syncedDirs = [...]string{"output", "subtasks"}

// jobPrefix is the key prefix of j's directory: JobDir relative to the
// data directory.
func jobPrefix(j store.Job) string { return filepath.ToSlash(JobDir("", j)) }

// materialise fills the scratch directory dir of job j from the artifact
// store (nothing without one). The staged uploads are adopted first, and
// pl.InputStaging cleared, since nothing is staged on this machine.
func (r *engineRunner) materialise(ctx context.Context, j store.Job, dir string, pl *Payload) error {
	a := r.cfg.Artifacts
	if a == nil {
		return nil
	}
	prefix := jobPrefix(j)
	if pl.InputStaging != "" {
		if err := adoptUploads(ctx, a, pl.InputStaging, prefix); err != nil {
			return err
		}
		pl.InputStaging = ""
	}
	if err := r.materialiseWork(ctx, prefix, dir); err != nil {
		return err
	}
	state, err := workspace.OpenTrusted(taskdir.StateDir(dir))
	if err != nil {
		return fmt.Errorf("materialise the job's files: %w", err)
	}
	defer state.Close()
	if _, err := blobstore.SyncDown(ctx, a, prefix+"/"+taskdir.State, state); err != nil {
		return fmt.Errorf("materialise the job's run state from %s: %w", a.Location(), err)
	}
	return nil
}

// materialiseWork fills work/ of the scratch directory dir from
// <prefix>/work/ in the artifact store (nothing without one).
func (r *engineRunner) materialiseWork(ctx context.Context, prefix, dir string) error {
	a := r.cfg.Artifacts
	if a == nil {
		return nil
	}
	work, err := taskdir.OpenWork(dir, true)
	if err != nil {
		return fmt.Errorf("materialise the job's files: %w", err)
	}
	defer work.Close()
	if _, err := blobstore.SyncDown(ctx, a, prefix+"/"+taskdir.Work, work); err != nil {
		return fmt.Errorf("materialise the job's workspace from %s: %w", a.Location(), err)
	}
	return nil
}

// adoptUploads moves the objects staged under key to <prefix>/work/input/
// and removes the staging job object. It is idempotent: what an earlier
// attempt (or the sweep) moved is not staged any more.
func adoptUploads(ctx context.Context, a blobstore.Store, key, prefix string) error {
	if !staging.ValidKey(key) {
		return fmt.Errorf("job payload field %q: expected 32 lowercase hex digits, found %q", staging.PayloadField, key)
	}
	from := blobstore.UploadPrefix(key)
	objs, err := a.List(ctx, from)
	if err != nil {
		return fmt.Errorf("adopt the files uploaded with the task: %w", err)
	}
	for _, o := range objs {
		to := blobstore.Join(prefix, taskdir.Work, "input", strings.TrimPrefix(o.Key, from+"/"))
		if err := moveObject(ctx, a, o.Key, to); err != nil {
			return fmt.Errorf("adopt the files uploaded with the task: %w", err)
		}
	}
	if err := a.Delete(ctx, blobstore.UploadJobKey(key)); err != nil {
		return fmt.Errorf("remove the upload staging job object: %w", err)
	}
	return nil
}

// moveObject copies the object from to the key to (its hash checked on
// the way) and deletes from. A source gone meanwhile (another mover) is
// not an error.
func moveObject(ctx context.Context, a blobstore.Store, from, to string) error {
	r, info, err := a.Get(ctx, from)
	if blobstore.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	err = a.Put(ctx, to, r, info.Size, info.SHA256)
	r.Close()
	if err != nil {
		return err
	}
	return a.Delete(ctx, from)
}

// syncBack copies output/, subtasks/ (mirrored unless mirror is false)
// and state/ of the scratch directory dir to the artifact store.
func syncBack(ctx context.Context, a blobstore.Store, j store.Job, dir string, mirror bool) (blobstore.SyncStats, error) {
	prefix := jobPrefix(j)
	total, err := syncWorkUp(ctx, a, prefix, dir, mirror)
	if err != nil {
		return total, err
	}
	state, err := workspace.OpenTrusted(taskdir.StateDir(dir))
	if errors.Is(err, fs.ErrNotExist) {
		return total, nil
	}
	if err != nil {
		return total, fmt.Errorf("sync the job's run state: %w", err)
	}
	defer state.Close()
	st, err := blobstore.SyncUp(ctx, a, state, blobstore.Join(prefix, taskdir.State), false)
	total.Add(st)
	return total, err
}

// syncWorkUp copies output/ and subtasks/ of work/ in the scratch
// directory dir to <prefix>/work/ in the artifact store; with mirror,
// files gone from dir are removed from the store too.
func syncWorkUp(ctx context.Context, a blobstore.Store, prefix, dir string, mirror bool) (blobstore.SyncStats, error) {
	var total blobstore.SyncStats
	work, err := taskdir.OpenWork(dir, false)
	if errors.Is(err, fs.ErrNotExist) {
		return total, nil // nothing was prepared (a noop job)
	}
	if err != nil {
		return total, fmt.Errorf("sync the job's files: %w", err)
	}
	defer work.Close()
	for _, name := range syncedDirs {
		d, err := work.OpenPath(name)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return total, fmt.Errorf("sync the job's %s/: %w", name, err)
		}
		st, err := blobstore.SyncUp(ctx, a, d, blobstore.Join(prefix, taskdir.Work, name), mirror)
		d.Close()
		total.Add(st)
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// syncOnMovement wraps the run's event sink so that the end of each
// movement (a transition, a question, the completion) syncs the job's
// files back before the run goes on; without an artifact store it is
// next itself. A failed sync here is retried by the next one and by the
// attempt's final sync (synced), which decides the outcome.
func (r *engineRunner) syncOnMovement(ctx context.Context, j store.Job, dir string, next engine.EventSink) engine.EventSink {
	a := r.cfg.Artifacts
	if a == nil {
		return next
	}
	var children atomic.Bool // the run has child jobs (subjobs.go)
	return engine.EventSinkFunc(func(rec engine.Record) {
		next.RunEvent(rec)
		switch ev := rec.Event.(type) {
		case engine.SubtaskSpawned:
			children.Store(children.Load() || ev.Job != 0)
		case engine.SubtaskFinished:
			children.Store(children.Load() || ev.Job != 0)
		}
		switch rec.Event.Kind() {
		case engine.KindTransition, engine.KindWaiting, engine.KindComplete:
			r.syncJob(ctx, a, j, dir, children.Load())
		}
	})
}

// unreachable begins the error of an attempt given back because the
// artifact store could not be reached (Result.NotCounted).
const unreachable = "artifact store unreachable: "

// artifactsFailed is the result of an attempt that could not fetch the
// job's files from the artifact store (err): with the store unreachable
// (blobstore.IsUnavailable: an outage, not the job's fault) the job is
// given back without spending an attempt, to run once the store answers
// again; otherwise the attempt failed.
func artifactsFailed(ctx context.Context, err error) Result {
	if ctx.Err() == nil && blobstore.IsUnavailable(err) {
		return Result{State: store.StateFailed, NotCounted: true, Error: unreachable + err.Error()}
	}
	return Result{State: store.StateFailed, Error: err.Error()}
}

// finalSyncTimeout bounds the sync at the end of an attempt, retries
// included.
const finalSyncTimeout = 10 * time.Minute

// syncRetryDelay is the pause before the try+1-th retry of a final sync
// that found the artifact store unreachable: 1 s, doubling, at most 30 s.
func (r *engineRunner) syncRetryDelay(try int) time.Duration {
	base := r.syncRetry
	if base <= 0 {
		base = time.Second
	}
	return min(base<<min(try, 5), 30*base)
}

// synced syncs the job's files back once its attempt has its result res;
// a sync that fails turns a result that would end or park the job into a
// retryable failure, so that no outcome is recorded whose files are not
// in the store. While the store is unreachable (blobstore.IsUnavailable)
// the sync is tried again, with a pause that grows, for up to
// finalSyncTimeout, each pause said in the job's log: the attempt keeps
// its lease and its result, and what the run produced is only on this
// machine. Past that bound the job is given back without spending an
// attempt (Result.NotCounted); its next attempt resumes from what the
// store holds. An attempt whose context ended (lease lost, shutdown)
// syncs nothing: another attempt runs the job. Nor does one that did not
// materialise the job's files (materialised false): its scratch directory
// holds a partial or stale copy, and the mirrored sync would delete from
// the store what the claim had not fetched yet.
func (r *engineRunner) synced(ctx context.Context, j *Job, materialised bool, res Result) Result {
	a := r.cfg.Artifacts
	if a == nil || ctx.Err() != nil || !materialised {
		return res
	}
	sctx, cancel := context.WithTimeout(ctx, finalSyncTimeout)
	defer cancel()
	dir := JobDir(r.cfg.DataDir, j.Job)
	for try := 0; ; try++ {
		_, err := r.syncJob(sctx, a, j.Job, dir, res.ChildJobs)
		if err == nil {
			return res
		}
		failed := Result{State: store.StateFailed, Error: fmt.Sprintf("sync the job's files to %s: %v", a.Location(), err), Usage: res.Usage, CostUSD: res.CostUSD, Report: res.Report}
		switch {
		case ctx.Err() != nil:
			return failed
		case sctx.Err() != nil:
			failed.NotCounted, failed.Error = true, unreachable+failed.Error+fmt.Sprintf(" (still, after %s of retries)", finalSyncTimeout)
			return failed
		case !blobstore.IsUnavailable(err):
			return failed
		}
		wait := r.syncRetryDelay(try)
		status(sctx, j, fmt.Sprintf("%s%s; retrying in %s", unreachable, failed.Error, wait))
		t := time.NewTimer(wait)
		select {
		case <-sctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
}

// status appends a protocol status line to the job's log (best effort:
// a lost lease shows in the outcome).
func status(ctx context.Context, j *Job, msg string) {
	if j.Emit == nil {
		return
	}
	data, err := protocol.Marshal(protocol.Status{Message: msg})
	if err != nil {
		return
	}
	_ = j.Emit(ctx, store.NewJobEvent{Type: store.JobEventProtocol, Data: data})
}

// SweepArtifactStaging is SweepStaging for the uploads staged in an
// artifact store (blobstore.UploadPrefix): files whose job has finished
// are adopted into its task's input/ (where a retry finds them); files no
// unfinished job names are removed once their newest object is older than
// grace; a job object left without files is removed.
func SweepArtifactStaging(ctx context.Context, st store.Store, a blobstore.Store, now time.Time, grace time.Duration, log *slog.Logger) (StagingSweep, error) {
	objs, err := a.List(ctx, "uploads")
	if err != nil {
		return StagingSweep{}, fmt.Errorf("list the staged uploads: %w", err)
	}
	area := storeStaging{a: a, files: map[string][]string{}, newest: map[string]time.Time{}}
	index := map[string]int{}
	var keys []stagedKey
	for _, o := range objs {
		rest := strings.TrimPrefix(o.Key, "uploads/")
		key, _, isFile := strings.Cut(rest, "/")
		if !isFile {
			key = strings.TrimSuffix(rest, staging.JobSuffix)
		}
		if !staging.ValidKey(key) {
			continue // not Maestro's
		}
		i, ok := index[key]
		if !ok {
			i = len(keys)
			index[key] = i
			keys = append(keys, stagedKey{key: key})
		}
		if isFile {
			keys[i].files = true
			area.files[key] = append(area.files[key], o.Key)
			if o.Modified.After(area.newest[key]) {
				area.newest[key] = o.Modified
			}
		} else {
			keys[i].jobFile = true
		}
	}
	return sweepStaged(ctx, st, area, keys, now, grace, log)
}

// storeStaging is the upload staging area of an artifact store: the
// objects of each key as listed, and the newest one's time.
type storeStaging struct {
	a      blobstore.Store
	files  map[string][]string
	newest map[string]time.Time
}

func (s storeStaging) where() string { return "artifact store" }

func (s storeStaging) job(ctx context.Context, st store.Store, key string) (store.Job, bool, error) {
	return artifactStagingJob(ctx, st, s.a, key)
}

func (s storeStaging) adopt(ctx context.Context, key string, j store.Job) error {
	return adoptUploads(ctx, s.a, key, jobPrefix(j))
}

func (s storeStaging) lastChange(key string) (time.Time, error) { return s.newest[key], nil }

func (s storeStaging) removeJobFile(ctx context.Context, key string) error {
	return s.a.Delete(ctx, blobstore.UploadJobKey(key))
}

func (s storeStaging) remove(ctx context.Context, key string) error {
	var errs []error
	for _, k := range append(s.files[key], blobstore.UploadJobKey(key)) {
		if err := s.a.Delete(ctx, k); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// artifactStagingJob is stagingJob for a job object in the artifact store.
func artifactStagingJob(ctx context.Context, st store.Store, a blobstore.Store, key string) (store.Job, bool, error) {
	data, err := blobstore.ReadAll(ctx, a, blobstore.UploadJobKey(key), 64)
	if blobstore.IsNotExist(err) {
		return store.Job{}, false, nil
	}
	if err != nil {
		return store.Job{}, false, fmt.Errorf("read the job object: %w", err)
	}
	return jobNamingKey(ctx, st, data, key)
}
