package main

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestProcessesOnOneDatabaseAgree (docs/scale-out.md, "One artifact
// location" and "Process names"): on one PostgreSQL, the first process
// records its artifact location; a worker started without --artifacts,
// or with another store, refuses to start naming the flag, its value and
// the recorded one, instead of running jobs without their files. A
// matching worker starts and runs a task with its uploaded file. A second
// serve under a running serve's --name refuses to start although that
// serve has no live session, and the name is free again once it stops (or
// at once for a process restarted on the same machine after a crash).
// --move-artifacts moves the database to another store once no running
// process uses the old one.
func TestProcessesOnOneDatabaseAgree(t *testing.T) {
	t.Parallel()
	m := newS3Machines(t)
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	dsn, s3, bucket, artifacts := m.dsn, m.s3, m.bucket, m.artifacts
	envA, envB, dataA, dataB := m.envA, m.envB, m.dataA, m.dataB
	dirA, dirB := m.dirA, m.dirB

	url, stderrA, stopA := startServe(ctx, t, envA, "--workers", "0", "--db", dsn, "--data-dir", dataA, "--artifacts", artifacts, "--name", "serveA")

	// refused runs a process that must not start and returns its output.
	refused := func(what string, env []string, args ...string) string {
		t.Helper()
		cctx, ccancel := context.WithTimeout(ctx, 90*time.Second)
		defer ccancel()
		cmd := exec.CommandContext(cctx, binary, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if ee := (*exec.ExitError)(nil); !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Fatalf("%s: %v, want exit code 1 (refused to start)\n%s", what, err, out)
		}
		if strings.Contains(string(out), s3.SecretKey) {
			t.Errorf("%s printed the S3 secret key:\n%s", what, out)
		}
		return string(out)
	}
	worker := func(extra ...string) []string {
		return append([]string{"worker", "--db", dsn, "--data-dir", dataB, "--lease", "3s"}, extra...)
	}

	out := refused("a worker without --artifacts", envB, worker("--name", "workerB")...)
	for _, want := range []string{
		"--artifacts is not set (files in the data directory): the processes on this database keep jobs' files in " + artifacts + " (recorded by serve serveA at ",
		"Start this worker with --artifacts " + artifacts, "--move-artifacts",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("a worker without --artifacts says:\n%s\nwant it to say %q", out, want)
		}
	}
	other := "s3://" + bucket + "/elsewhere"
	out = refused("a worker with another store", envB, worker("--name", "workerB", "--artifacts", other)...)
	if want := "--artifacts " + other + ": the processes on this database keep jobs' files in " + artifacts; !strings.Contains(out, want) {
		t.Errorf("a worker with another store says:\n%s\nwant it to say %q", out, want)
	}

	// A second serve under serveA's name, while serveA runs (with no live
	// session), is refused and names the running one.
	out = refused("a second serve under serveA", envB, "serve", "--listen", "127.0.0.1:0", "--workers", "0", "--db", dsn,
		"--data-dir", filepath.Join(dirB, "serve"), "--artifacts", artifacts, "--name", "serveA")
	if want := "--name serveA is taken: the serve at " + url + " runs under it"; !strings.Contains(out, want) {
		t.Errorf("a second serve under serveA says:\n%s\nwant it to say %q", out, want)
	}

	// The matching worker starts and runs a task with its uploaded file;
	// a second worker under its name is refused.
	cmd := exec.CommandContext(ctx, binary, worker("--name", "workerB", "--artifacts", artifacts+"/")...)
	cmd.Env = envB
	b := launch(t, cmd)
	sout, serr, err := submitBrief(ctx, t, envA, url)
	if err != nil || !strings.Contains(sout, "summarised the brief") {
		t.Fatalf("submit --file -f: %v\nstdout:\n%s\nstderr:\n%s\nA:\n%s\nB:\n%s", err, sout, serr, stderrA.String(), b.stderr.String())
	}
	out = refused("a second worker under workerB", envA, "worker", "--db", dsn, "--data-dir", filepath.Join(dirA, "w"),
		"--artifacts", artifacts, "--name", "workerB")
	if want := "--name workerB is taken: the worker at "; !strings.Contains(out, want) {
		t.Errorf("a second worker under workerB says:\n%s\nwant it to say %q", out, want)
	}

	// serveA stops: its name is free at once, but moving to another
	// store is refused while workerB still uses the old one.
	stopA()
	moveArgs := []string{"serve", "--listen", "127.0.0.1:0", "--workers", "0", "--db", dsn, "--data-dir", dataA,
		"--artifacts", other, "--move-artifacts", "--name", "serveA"}
	out = refused("--move-artifacts while workerB runs", envA, moveArgs...)
	if want := "--move-artifacts: the worker workerB at "; !strings.Contains(out, want) || !strings.Contains(out, "still runs with "+artifacts) {
		t.Errorf("--move-artifacts while workerB runs says:\n%s\nwant it to say %q … still runs with %s", out, want, artifacts)
	}
	// workerB is killed: restarted on the same machine, it takes its
	// name back at once (its pid no longer runs); stopped, it frees it.
	b.cmd.Process.Kill()
	<-b.done
	cmd = exec.CommandContext(ctx, binary, worker("--name", "workerB", "--artifacts", artifacts)...)
	cmd.Env = envB
	b = launch(t, cmd)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !strings.Contains(b.stderr.String(), "maestro worker workerB: ") {
		select {
		case <-tick.C:
		case <-b.done:
			t.Fatalf("workerB restarted after SIGKILL: %s\n%s", b.status(), b.stderr.String())
		case <-ctx.Done():
			t.Fatalf("workerB restarted after SIGKILL did not start\n%s", b.stderr.String())
		}
	}
	if !strings.Contains(b.stderr.String(), "took over the --name of a process that ended without saying so") {
		t.Errorf("workerB restarted after SIGKILL does not say it took its name back:\n%s", b.stderr.String())
	}
	b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.done:
	case <-ctx.Done():
		t.Fatalf("workerB did not stop on SIGTERM\n%s", b.stderr.String())
	}
	_, stderr2, stop2 := startServe(ctx, t, envA, moveArgs[3:]...)
	out = refused("a worker with the old store after the move", envB, worker("--name", "workerB", "--artifacts", artifacts)...)
	if want := "--artifacts " + artifacts + ": the processes on this database keep jobs' files in " + other + " (recorded by serve serveA at "; !strings.Contains(out, want) {
		t.Errorf("a worker with the old store after the move says:\n%s\nwant it to say %q", out, want)
	}
	stop2()
	if !strings.Contains(stderr2.String(), "the artifact location of this database moved") {
		t.Errorf("the serve that moved the store did not log the move:\n%s", stderr2.String())
	}
}
