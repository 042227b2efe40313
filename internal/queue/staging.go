package queue

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/maestro-run/maestro/internal/staging"
	"github.com/maestro-run/maestro/internal/store"
	"github.com/maestro-run/maestro/internal/taskdir"
	"github.com/maestro-run/maestro/internal/workspace"
)

// The upload staging area: files sent with a task's creation wait in
// <dataDir>/uploads/<key>/ until the task's job moves them into its
// input/. Once the task and its job exist, the API writes the job's id to
// <dataDir>/uploads/<key>.job (staging.JobFile), so that the maintenance
// sweep (SweepStaging) can find the job of a directory without scanning
// the jobs.

// Defaults of the staging sweep (MaintenanceConfig).
const (
	// DefaultStagingGrace is how long a staging directory that no
	// unfinished job names is left alone: the API writes the files before
	// it creates the task.
	DefaultStagingGrace = time.Hour
	// DefaultStagingSweepEvery is how often the leader sweeps.
	DefaultStagingSweepEvery = time.Minute
)

// moveStagedInput moves the files of the staging directory key into the
// input/ of taskDir's workspace (same relative paths, replacing files of
// the same name) and removes the staging directory and its job file. It
// is idempotent: a directory already moved (an earlier attempt) is not an
// error, a move an earlier attempt left half done is finished, and two
// movers at once (a runner and the sweep) each move what the other has
// not. The workspace is agent-writable: every directory in it is reached
// from the task directory without following a symbolic link, so a link
// planted there (input/ → another task's input/) cannot lead the move
// elsewhere; such a move fails.
func moveStagedInput(dataDir, taskDir, key string) error {
	if !staging.ValidKey(key) {
		return fmt.Errorf("job payload field %q: expected 32 lowercase hex digits, found %q", staging.PayloadField, key)
	}
	if _, ok := workspace.Within(filepath.Clean(dataDir), filepath.Clean(taskDir)); !ok {
		return fmt.Errorf("task directory %s is not inside the data directory %s", taskDir, dataDir)
	}
	uploads, err := workspace.OpenTrusted(filepath.Join(dataDir, "uploads"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil // nothing was ever staged here, or all is done
	}
	if err != nil {
		return fmt.Errorf("open the upload staging area: %w", err)
	}
	defer uploads.Close()
	src, err := uploads.OpenPath(key)
	switch {
	case err == nil:
		err = moveTree(src, taskDir)
		src.Close()
		if err != nil {
			return fmt.Errorf("move the files uploaded with the task into input/: %w", err)
		}
		if err := uploads.RemoveAll(key); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove the upload staging directory: %w", err)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("read the upload staging directory: %w", err)
	}
	if err := uploads.Remove(key + staging.JobSuffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove the upload staging job file: %w", err)
	}
	return nil
}

// moveTree moves the regular files under src into the input/ of taskDir's
// workspace. A file or directory another mover took meanwhile is skipped.
func moveTree(src *workspace.Dir, taskDir string) error {
	work, err := taskdir.OpenWork(taskDir, true)
	if err != nil {
		return err
	}
	defer work.Close()
	in, err := work.MkdirPath("input", 0o755)
	if err != nil {
		return fmt.Errorf("input/: %w", err)
	}
	defer in.Close()
	err = src.Walk(workspace.WalkLimits{}, func(rel string, e fs.DirEntry) error {
		if !e.Type().IsRegular() {
			return nil
		}
		dir, base := path.Split(rel)
		from, to := src, in
		if dir = strings.TrimSuffix(dir, "/"); dir != "" {
			var err error
			if from, err = src.OpenPath(dir); errors.Is(err, fs.ErrNotExist) {
				return nil // another mover took this part
			} else if err != nil {
				return err
			}
			defer from.Close()
			if to, err = in.MkdirPath(dir, 0o755); err != nil {
				return fmt.Errorf("input/%s: %w", dir, err)
			}
			defer to.Close()
		}
		if err := from.Rename(base, to, base); err != nil {
			if _, lerr := from.Lstat(base); errors.Is(lerr, fs.ErrNotExist) {
				return nil // moved by another mover meanwhile
			}
			return fmt.Errorf("input/%s: %w", rel, err)
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil // another mover finished and removed the directory
	}
	return err
}

// StagingSweep counts what one SweepStaging did.
type StagingSweep struct {
	// Moved counts the staging directories of finished jobs moved into
	// their workspace's input/ (where a retried job finds them).
	Moved int
	// Removed counts the staging directories no job names (an API crash
	// between staging and task creation, or a job that is gone) removed
	// after the grace period.
	Removed int
}

// SweepStaging cleans the upload staging area of dataDir so that no
// staging directory outlives its job:
//
//   - a directory whose job file names an unfinished job is left to the
//     job's runner;
//   - one whose job is finished (cancelled or failed before it ran, a
//     noop piece) is moved into that job's input/, as the runner would
//     have done, so a retry still finds the files;
//   - one that no unfinished job names and whose newest change is older
//     than grace is removed (the task was never created, or its job is
//     gone); the unfinished jobs are listed only when such a directory
//     exists;
//   - a job file left without its directory is removed.
//
// It only reads the staging area and the jobs it names, so it is cheap
// when the area is empty. Entries it does not recognise are left alone.
func SweepStaging(ctx context.Context, st store.Store, dataDir string, now time.Time, grace time.Duration, log *slog.Logger) (StagingSweep, error) {
	uploads := filepath.Join(dataDir, "uploads")
	ents, err := os.ReadDir(uploads)
	if errors.Is(err, fs.ErrNotExist) {
		return StagingSweep{}, nil
	}
	if err != nil {
		return StagingSweep{}, fmt.Errorf("read the upload staging area: %w", err)
	}
	found := map[string]*stagedKey{}
	at := func(key string) *stagedKey {
		if found[key] == nil {
			found[key] = &stagedKey{key: key}
		}
		return found[key]
	}
	for _, e := range ents {
		name := e.Name()
		if staging.ValidKey(name) && e.IsDir() {
			at(name).files = true
		} else if key, ok := strings.CutSuffix(name, staging.JobSuffix); ok && staging.ValidKey(key) && e.Type().IsRegular() {
			at(key).jobFile = true
		}
	}
	keys := make([]stagedKey, 0, len(found))
	for _, k := range found {
		keys = append(keys, *k)
	}
	slices.SortFunc(keys, func(a, b stagedKey) int { return strings.Compare(a.key, b.key) })
	return sweepStaged(ctx, st, dirStaging{dataDir}, keys, now, grace, log)
}

// stagedKey is one staging key found in a staging area: whether files
// wait under it and whether it has a job file.
type stagedKey struct {
	key            string
	files, jobFile bool
}

// stagingArea is where uploads wait for their job: the data directory's
// uploads/ (dirStaging) or an artifact store's (storeStaging). The sweep
// judges the keys of both the same way (sweepStaged).
type stagingArea interface {
	// where names the area in log records.
	where() string
	// job returns the job the key's job file names, when that job exists
	// and its payload names key (ok).
	job(ctx context.Context, st store.Store, key string) (store.Job, bool, error)
	// adopt moves the key's files into the input/ of finished job j and
	// removes them and the job file from the area.
	adopt(ctx context.Context, key string, j store.Job) error
	// lastChange is the newest change to the key's files (zero: they are
	// gone meanwhile).
	lastChange(key string) (time.Time, error)
	// removeJobFile removes the key's job file; remove removes its files
	// and its job file.
	removeJobFile(ctx context.Context, key string) error
	remove(ctx context.Context, key string) error
}

// sweepStaged is the sweep of SweepStaging and SweepArtifactStaging over
// the keys found in area.
func sweepStaged(ctx context.Context, st store.Store, area stagingArea, keys []stagedKey, now time.Time, grace time.Duration, log *slog.Logger) (StagingSweep, error) {
	var res StagingSweep
	var errs []error
	var unfinished map[string]bool // keys named by unfinished jobs, read once when needed
	for _, e := range keys {
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		key := e.key
		if !e.files {
			// The runner moved the files (perhaps before the API wrote
			// the job file): nothing is waiting.
			if err := area.removeJobFile(ctx, key); err != nil {
				errs = append(errs, fmt.Errorf("staging %s: remove the job file: %w", key, err))
			}
			continue
		}
		if e.jobFile {
			j, ok, err := area.job(ctx, st, key)
			if err != nil {
				errs = append(errs, fmt.Errorf("staging %s: %w", key, err))
				continue
			}
			if ok {
				if !j.State.Terminal() {
					continue // the job's runner moves the files
				}
				if err := area.adopt(ctx, key, j); err != nil {
					errs = append(errs, fmt.Errorf("staging %s of job %d: %w", key, j.ID, err))
					continue
				}
				res.Moved++
				log.Info("moved the staged uploads of a finished job into its input/", "in", area.where(), "key", key, "job", j.ID, "task", j.TaskID, "state", j.State)
				continue
			}
			// The job file names no job that names this key: treat the
			// files as ones without a job file.
		}
		changed, err := area.lastChange(key)
		if err != nil {
			errs = append(errs, fmt.Errorf("staging %s: %w", key, err))
			continue
		}
		if changed.IsZero() || now.Sub(changed) < grace {
			continue // gone meanwhile (a runner moved them), or young
		}
		if unfinished == nil {
			if unfinished, err = unfinishedStagingKeys(ctx, st); err != nil {
				return res, errors.Join(append(errs, err)...)
			}
		}
		if unfinished[key] {
			continue // its job file was lost (a crash); the job's runner moves them
		}
		if err := area.remove(ctx, key); err != nil {
			errs = append(errs, fmt.Errorf("staging %s: remove: %w", key, err))
			continue
		}
		res.Removed++
		log.Info("removed staged uploads no job names", "in", area.where(), "key", key, "last_change", changed.UTC())
	}
	return res, errors.Join(errs...)
}

// dirStaging is the upload staging area of a data directory.
type dirStaging struct{ dataDir string }

func (d dirStaging) where() string { return "data directory" }

func (d dirStaging) job(ctx context.Context, st store.Store, key string) (store.Job, bool, error) {
	return stagingJob(ctx, st, d.dataDir, key)
}

func (d dirStaging) adopt(_ context.Context, key string, j store.Job) error {
	return moveStagedInput(d.dataDir, JobDir(d.dataDir, j), key)
}

func (d dirStaging) lastChange(key string) (time.Time, error) {
	return newestChange(staging.Dir(d.dataDir, key))
}

func (d dirStaging) removeJobFile(_ context.Context, key string) error {
	if err := os.Remove(staging.JobFile(d.dataDir, key)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

func (d dirStaging) remove(ctx context.Context, key string) error {
	if err := os.RemoveAll(staging.Dir(d.dataDir, key)); err != nil {
		return err
	}
	return d.removeJobFile(ctx, key)
}

// stagingJob reads the job file of staging directory key and returns its
// job when that job exists and its payload names key (ok). An unreadable
// file, an unknown job or one naming another key is not an error (ok
// false): the directory is then judged as one without a job file.
func stagingJob(ctx context.Context, st store.Store, dataDir, key string) (store.Job, bool, error) {
	data, err := os.ReadFile(staging.JobFile(dataDir, key))
	if errors.Is(err, fs.ErrNotExist) {
		return store.Job{}, false, nil
	}
	if err != nil {
		return store.Job{}, false, fmt.Errorf("read the job file: %w", err)
	}
	return jobNamingKey(ctx, st, data, key)
}

// jobNamingKey returns the job whose id data holds when that job exists
// and its payload names the staging key (ok).
func jobNamingKey(ctx context.Context, st store.Store, data []byte, key string) (store.Job, bool, error) {
	id, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	if err != nil || id <= 0 {
		return store.Job{}, false, nil // half written when the API stopped
	}
	ctx, cancel := context.WithTimeout(ctx, storeCallTimeout)
	defer cancel()
	j, err := st.GetJob(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return store.Job{}, false, nil
	}
	if err != nil {
		return store.Job{}, false, fmt.Errorf("read job %d: %w", id, err)
	}
	if stagingKeyOf(j.Payload) != key {
		return store.Job{}, false, nil // a job file from another database
	}
	return j, true, nil
}

// stagingKeyOf returns the input_staging field of a job payload, or "".
func stagingKeyOf(payload json.RawMessage) string {
	if !bytes.Contains(payload, []byte(`"`+staging.PayloadField+`"`)) {
		return ""
	}
	var pl struct {
		InputStaging string `json:"input_staging"`
	}
	if json.Unmarshal(payload, &pl) != nil {
		return ""
	}
	return pl.InputStaging
}

// unfinishedStagingKeys returns the staging keys named by the payloads of
// the jobs that have not finished.
func unfinishedStagingKeys(ctx context.Context, st store.Store) (map[string]bool, error) {
	var states []store.State
	for _, s := range store.States() {
		if !s.Terminal() {
			states = append(states, s)
		}
	}
	keys := map[string]bool{}
	var after int64
	for {
		lctx, cancel := context.WithTimeout(ctx, storeCallTimeout)
		jobs, err := st.ListJobs(lctx, store.JobFilter{States: states, AfterID: after, Limit: store.MaxListLimit})
		cancel()
		if err != nil {
			return nil, fmt.Errorf("list the unfinished jobs: %w", err)
		}
		for _, j := range jobs {
			after = j.ID
			if k := stagingKeyOf(j.Payload); k != "" {
				keys[k] = true
			}
		}
		if len(jobs) < store.MaxListLimit {
			return keys, nil
		}
	}
}

// newestChange returns the latest modification time of dir and of
// everything in it (a file still being written keeps it young).
func newestChange(dir string) (time.Time, error) {
	var newest time.Time
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		info, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if info.ModTime().After(newest) {
			newest = info.ModTime()
		}
		return nil
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("read the upload staging directory: %w", err)
	}
	return newest, nil
}
