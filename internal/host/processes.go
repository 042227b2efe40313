package host

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/maestro-run/maestro/internal/blobstore"
	"github.com/maestro-run/maestro/internal/queue"
	"github.com/maestro-run/maestro/internal/sessionowner"
	"github.com/maestro-run/maestro/internal/store"
	"github.com/maestro-run/maestro/internal/store/sqlite"
)

// ProcessRecord is what a serve or worker process on a shared database
// (PostgreSQL) records about itself (docs/scale-out.md, "One artifact
// location" and "Process names"): its artifact location, checked against
// the one the database records, and its --name, held while it runs.
type ProcessRecord struct {
	st    store.Processes
	p     store.Process
	stale time.Duration
	log   *slog.Logger
}

// ProcessOptions say who this process is.
type ProcessOptions struct {
	Kind, Name string
	// Address says where it runs (a serve's advertised URL); default host
	// and pid.
	Address string
	// Artifacts is the process's artifact store (nil: the data directory)
	// and ArtifactsFrom where it was set ("--artifacts", "artifacts in
	// PATH"; "" when unset).
	Artifacts     blobstore.Store
	ArtifactsFrom string
	// Move replaces the recorded artifact location (--move-artifacts).
	Move bool
	// StaleAfter is how long the process may miss heartbeats before its
	// name is free for another; it heartbeats three times as often.
	StaleAfter time.Duration
}

// JoinStore records this process (a serve or worker) in st, or says why
// it must not start: another running process holds its --name, or its
// artifact location is not the database's. On SQLite (one process) it
// records nothing and returns nil, which is ready to use. Run heartbeats
// the record; Close frees the name.
func JoinStore(ctx context.Context, st store.Store, o ProcessOptions, log *slog.Logger) (*ProcessRecord, error) {
	if _, lite := st.(*sqlite.Store); lite {
		if o.Move {
			log.Warn("--move-artifacts does nothing on SQLite: one process uses the database, so no artifact location is recorded")
		}
		return nil, nil
	}
	if o.StaleAfter <= 0 {
		o.StaleAfter = sessionowner.DefaultStaleAfter
	}
	host, _ := os.Hostname()
	if o.Address == "" {
		o.Address = fmt.Sprintf("%s (pid %d)", host, os.Getpid())
	}
	s := &ProcessRecord{st: st, stale: o.StaleAfter, log: log, p: store.Process{
		Name: o.Name, Kind: o.Kind, Instance: rand.Text(), Address: o.Address, Host: host, PID: os.Getpid(),
		Artifacts: artifactLocation(o.Artifacts),
	}}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	now := time.Now()
	holder, err := st.StartProcess(ctx, s.p, now.Add(-s.stale))
	if errors.Is(err, store.ErrConflict) && crashedHere(holder, host) {
		// A process restarted after a crash takes its name back at once.
		if err := st.StopProcess(ctx, holder.Name, holder.Instance); err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, fmt.Errorf("record this process under --name %s: %w", o.Name, err)
		}
		log.Info("took over the --name of a process that ended without saying so", "name", o.Name, "pid", holder.PID)
		dead := holder
		holder, err = st.StartProcess(ctx, s.p, now.Add(-s.stale))
		if err == nil {
			requeueJobsOf(ctx, st, o.Name, dead, log)
		}
	}
	if errors.Is(err, store.ErrConflict) {
		age := max(now.Sub(holder.HeartbeatAt), 0)
		return nil, fmt.Errorf("--name %s is taken: the %s at %s runs under it (heartbeat %s ago); give each serve and worker process on this database its own --name (if that process has stopped, the name is free within %s)",
			o.Name, holder.Kind, holder.Address, age.Round(time.Second), max(s.stale-age, 0).Round(time.Second))
	}
	if err != nil {
		return nil, fmt.Errorf("record this process under --name %s: %w", o.Name, err)
	}
	if err := s.checkArtifacts(ctx, o, now); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// crashedHere reports whether the process p ran on this host and its pid
// no longer runs (or is this process's own: a container restarted with
// the same pid), so it ended without recording it. A pid that is only
// ending counts as ended: a process killed (kill -9) is a zombie until
// its parent reaps it, and still in its exit for a moment before, and
// kill(pid, 0) answers for both as for a live one, so a worker restarted
// at once was refused its --name for the whole stale time.
func crashedHere(p store.Process, host string) bool {
	if p.Host == "" || p.Host != host || p.PID <= 0 {
		return false
	}
	return p.PID == os.Getpid() || errors.Is(syscall.Kill(p.PID, 0), syscall.ESRCH) || exiting(p.PID)
}

// pfExiting is the kernel's PF_EXITING task flag: the process is in its
// exit (it stays set in the zombie it leaves).
const pfExiting = 0x4

// exiting reports whether the process pid has ended or is ending: a
// zombie (state Z, or X as it is reaped) or in its exit (PF_EXITING), read
// from /proc/PID/stat (Linux; elsewhere it reports false).
func exiting(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) state ppid pgrp session tty_nr tpgid flags …: comm may
	// hold spaces and parentheses, so the fields start after the last ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 7 {
		return false
	}
	if f[0] == "Z" || f[0] == "X" || f[0] == "x" {
		return true
	}
	flags, err := strconv.ParseUint(f[6], 10, 64)
	return err == nil && flags&pfExiting != 0
}

// requeueJobsOf gives back at once the jobs the process that ended
// without saying so under name (dead, a process restarted on its machine)
// held: leased to its slots, name/1, name/2, …, they waited for their
// lease to expire (30 s by default) while the restarted process sat idle.
// As the reaper does, the dead attempt counts (a job that kills its
// worker each time ends failed); each Fail is fenced by the job's lease,
// so a job the reaper or a cancel got first is left alone. Errors are
// logged: the reaper still reclaims what is left.
func requeueJobsOf(ctx context.Context, st store.Store, name string, dead store.Process, log *slog.Logger) {
	reason := fmt.Sprintf("its %s %s (pid %d on %s) ended without saying so: given back when a process restarted under its --name", dead.Kind, name, dead.PID, dead.Host)
	var after int64
	for {
		jobs, err := st.ListJobs(ctx, store.JobFilter{States: []store.State{store.StateDispatching, store.StateRunning}, AfterID: after, Limit: store.MaxListLimit})
		if err != nil {
			log.Warn("give back the jobs of the process that ended: the reaper will when their leases expire", "name", name, "err", err)
			return
		}
		for _, j := range jobs {
			after = j.ID
			if !slotOf(j.LeaseOwner, name) {
				continue
			}
			l := store.Lease{JobID: j.ID, Attempt: j.Attempt, Owner: j.LeaseOwner}
			got, err := st.Fail(ctx, l, store.FailParams{Error: reason})
			switch {
			case errors.Is(err, store.ErrLeaseLost):
			case err != nil:
				log.Warn("give back a job of the process that ended: the reaper will when its lease expires", "job", j.ID, "err", err)
			default:
				log.Info("gave back a job of the process that ended", "job", j.ID, "attempt", j.Attempt, "owner", j.LeaseOwner, "state", got.State)
			}
		}
		if len(jobs) < store.MaxListLimit {
			return
		}
	}
}

// slotOf reports whether a lease owner is one of the slots of the process
// named name (name/1, name/2, …: queue.Pool's slot names).
func slotOf(owner, name string) bool {
	n, ok := strings.CutPrefix(owner, name+"/")
	if !ok || n == "" {
		return false
	}
	for _, c := range n {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// checkArtifacts compares this process's artifact location with the one
// the database records (recording it if none is), or replaces the record
// (o.Move) when no other running process uses another.
func (s *ProcessRecord) checkArtifacts(ctx context.Context, o ProcessOptions, now time.Time) error {
	loc, by := s.p.Artifacts, o.Kind+" "+o.Name
	if o.Move {
		live, err := s.st.ListProcesses(ctx, now.Add(-s.stale))
		if err != nil {
			return fmt.Errorf("--move-artifacts: %w", err)
		}
		for _, p := range live {
			if p.Name != o.Name && p.Artifacts != loc {
				return fmt.Errorf("--move-artifacts: the %s %s at %s still runs with %s: stop every process that uses the old location first, then start this one again",
					p.Kind, p.Name, p.Address, describeLocation(p.Artifacts))
			}
		}
		old, err := s.st.GetSetting(ctx, store.SettingArtifacts)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("--move-artifacts: %w", err)
		}
		if _, err := s.st.PutSetting(ctx, store.SettingArtifacts, loc, by); err != nil {
			return fmt.Errorf("--move-artifacts: %w", err)
		}
		if err == nil && old.Value != loc {
			s.log.Warn("the artifact location of this database moved: every serve and worker must now use it", "from", describeLocation(old.Value), "to", describeLocation(loc))
		}
		return nil
	}
	rec, err := s.st.InitSetting(ctx, store.SettingArtifacts, loc, by)
	if err != nil {
		return fmt.Errorf("check the artifact location against the database's: %w", err)
	}
	if rec.Value == loc {
		return nil
	}
	given := "--artifacts is not set (files in the data directory)"
	switch {
	case o.ArtifactsFrom == "--artifacts":
		given = "--artifacts " + loc
	case o.ArtifactsFrom != "":
		given = o.ArtifactsFrom + " (" + loc + ")"
	}
	fix := "Start this " + o.Kind + " with --artifacts " + rec.Value
	if rec.Value == "" {
		fix = "Start this " + o.Kind + " without --artifacts (and without artifacts: in config.yaml)"
	}
	move := "to move every process to " + loc + " for good, copy the files there"
	if loc == "" {
		move = "to keep files in each process's data directory from now on (one machine only)"
	}
	return fmt.Errorf("%s: the processes on this database keep jobs' files in %s (recorded by %s at %s); a process with another location would run jobs without their files and keep its output where the others cannot read it. %s; or, %s, stop every serve and worker, and start one with --move-artifacts (docs/scale-out.md, \"One artifact location\")",
		given, describeLocation(rec.Value), rec.UpdatedBy, rec.UpdatedAt.UTC().Format("2006-01-02 15:04:05 MST"), fix, move)
}

// artifactLocation is the credential-free form of an artifact store that
// processes compare: s3://bucket/prefix (an S3 URL carries no keys: they
// come from the environment or config.yaml), a clean absolute directory,
// or "" for the data directory.
func artifactLocation(a blobstore.Store) string {
	if a == nil {
		return ""
	}
	loc := a.Location()
	if strings.HasPrefix(loc, "s3://") {
		return loc
	}
	return filepath.Clean(loc)
}

// describeLocation names an artifact location in a message.
func describeLocation(loc string) string {
	if loc == "" {
		return "their own data directories"
	}
	return loc
}

// Run heartbeats the record until ctx ends. A record another process took
// over (this one missed its heartbeats) is recorded again when the name is
// free, else reported.
func (s *ProcessRecord) Run(ctx context.Context) {
	if s == nil {
		return
	}
	t := time.NewTicker(s.stale / 3)
	defer t.Stop()
	// The store's outage, logged as the queue logs its claims' (what
	// failed, that it retries, what to check).
	out := queue.Outage{What: "heartbeat of this process's --name", Log: s.log, Now: time.Now, Attrs: []any{"name", s.p.Name},
		Hint: ": the store does not answer; retrying every " + (s.stale / 3).String() +
			" (check that the database is up and reachable from here; once it has failed for " + s.stale.String() +
			", a process started under this --name may take it)"}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		bctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := s.st.HeartbeatProcess(bctx, s.p.Name, s.p.Instance)
		if errors.Is(err, store.ErrNotFound) {
			var holder store.Process
			if holder, err = s.st.StartProcess(bctx, s.p, time.Now().Add(-s.stale)); errors.Is(err, store.ErrConflict) {
				s.log.Error("another process took this process's --name after it missed its heartbeats: give each process its own --name", "name", s.p.Name, "other", holder.Kind+" at "+holder.Address)
				err = nil
			}
		}
		switch {
		case err == nil:
			out.OK()
		case ctx.Err() == nil:
			out.Failed(err)
		}
		cancel()
	}
}

// Close records the process stopped: its name is free at once.
func (s *ProcessRecord) Close() {
	if s == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.st.StopProcess(ctx, s.p.Name, s.p.Instance); err != nil && !errors.Is(err, store.ErrNotFound) {
		s.log.Warn("record this process stopped", "name", s.p.Name, "err", err)
	}
}
