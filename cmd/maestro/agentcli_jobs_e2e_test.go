package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/agentcli/agentclitest"
	"github.com/maestro-run/maestro/internal/proctest"
	"github.com/maestro-run/maestro/internal/queue"
	"github.com/maestro-run/maestro/internal/store"
	"github.com/maestro-run/maestro/internal/store/sqlite"
)

// The jobs entry point of issue 16 item 1: a job queued on `maestro serve`
// whose piece movement runs an agent CLI, interrupted while the CLI waits
// on a model call that hangs.

// cliGroups waits until a process runs in dir (the CLI of the job's
// movement) and returns the process groups of the processes there, which
// the test's cleanup SIGKILLs.
func cliGroups(t *testing.T, dir string, within time.Duration) []int {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		var groups []int
		proctest.Processes(t, func(p proctest.Process) bool {
			if cwd, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(p.PID), "cwd")); err == nil && cwd == dir && !slices.Contains(groups, p.Pgrp) {
				groups = append(groups, p.Pgrp)
			}
			return false
		})
		if len(groups) > 0 {
			// A failed test leaves no orphan behind.
			t.Cleanup(func() {
				for _, pgid := range groups {
					_ = syscall.Kill(-pgid, syscall.SIGKILL)
				}
			})
			return groups
		}
		if time.Now().After(deadline) {
			t.Fatalf("no process runs in the job's workspace %s", dir)
		}
		proctest.Alive(os.Getpid(), 50*time.Millisecond) // a bounded pause between scans
	}
}

// groupsGone fails the test when a process of groups is not on its way
// out (killed or exiting, see dying) deadline after since, or still runs
// 30 s after since. The deadline is on the kill, not on the kernel's
// teardown of a large process, which takes seconds of a loaded machine.
func groupsGone(t *testing.T, groups []int, since time.Time, deadline time.Duration) {
	t.Helper()
	const gone = 30 * time.Second
	for _, pgid := range groups {
		for {
			left := proctest.Processes(t, func(p proctest.Process) bool { return p.Pgrp == pgid && !dying(p.PID) })
			if len(left) == 0 {
				break
			}
			if time.Since(since) > deadline {
				t.Fatalf("processes %v of the CLI's group %d are neither killed nor exiting %v after the interrupt", left, pgid, time.Since(since).Round(time.Millisecond))
			}
			// A bounded pause: the process's end, or a tenth of a second
			// (a kill shows in /proc before the end).
			proctest.Alive(left[0], min(max(deadline-time.Since(since), 0), 100*time.Millisecond))
		}
	}
	t.Logf("the CLI's process groups %v were killed or exiting %v after the interrupt", groups, time.Since(since).Round(time.Millisecond))
	for _, pgid := range groups {
		for {
			left := proctest.Processes(t, func(p proctest.Process) bool { return p.Pgrp == pgid })
			if len(left) == 0 {
				break
			}
			if time.Since(since) > gone {
				t.Fatalf("processes %v of the CLI's group %d still run %v after the interrupt", left, pgid, time.Since(since).Round(time.Millisecond))
			}
			proctest.Alive(left[0], max(gone-time.Since(since), 0)) // a negative wait would block
		}
	}
	t.Logf("the CLI's process groups %v ended %v after the interrupt", groups, time.Since(since).Round(time.Millisecond))
}

// pfExiting is the PF_EXITING bit of a task's flags (/proc/pid/stat
// field 9): the task is in do_exit.
const pfExiting = 0x4

// dying reports whether pid is on its way out: gone or a zombie, exiting
// (PF_EXITING), or with SIGKILL pending (which no process outlives).
func dying(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	i := bytes.LastIndexByte(stat, ')')
	if err != nil || i < 0 {
		return true
	}
	// state ppid pgrp session tty_nr tpgid flags …
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 7 || f[0] == "Z" || f[0] == "X" {
		return true
	}
	if flags, _ := strconv.ParseUint(f[6], 10, 64); flags&pfExiting != 0 {
		return true
	}
	status, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return true
	}
	for line := range strings.Lines(string(status)) {
		if k, v, ok := strings.Cut(line, ":"); ok && (k == "SigPnd" || k == "ShdPnd") {
			if mask, _ := strconv.ParseUint(strings.TrimSpace(v), 16, 64); mask&(1<<(syscall.SIGKILL-1)) != 0 {
				return true
			}
		}
	}
	return false
}

// jobInterruptCases interrupt a running agent-CLI job: a user cancel
// (through `maestro tasks cancel`), or SIGTERM to serve, which gives the
// job its shutdown grace (docs/queue.md, "Graceful shutdown"), then ends
// it and releases it to the queue.
var jobInterruptCases = []struct {
	name string
	// within is how long after the interrupt the CLI's group may live.
	within time.Duration
	// state is the job's state afterwards and reason what its last status
	// event says why (its error for a cancel, its reason for a release).
	state  store.State
	reason string
	// interrupted: the attempt logs the movement's interruption (a
	// protocol error of type cancelled) before it is released. A cancelled
	// job's lease is gone, so its attempt writes nothing after the cancel.
	interrupted bool
}{
	{"cancel", 2 * time.Second, store.StateCancelled, "stop the hung CLI", false},
	{"SIGTERM", queue.DefaultShutdownGrace + 2*time.Second, store.StateQueued, "released", true},
}

// A job of a piece whose movement runs each real CLI, interrupted while
// the CLI waits on the model: no process of the CLI's process group runs
// 2 s after a cancel (2 s after the shutdown grace on SIGTERM), and the
// job's log records it: cancelled with the user's reason; or the
// movement's interruption (error_type cancelled), then released to the
// queue (attempt not counted), where the next worker resumes it.
func TestAgentCLIJobInterruptE2E(t *testing.T) {
	t.Parallel()
	for _, s := range agentclitest.Setups() {
		// The job path (cancel, graceful shutdown) routes the interrupt
		// to the executor's group kill that TestAgentCLIInterruptE2E
		// tests on every CLI: here it runs with Claude Code alone
		// (OpenCode cost two launches of 15-20 CPU-s each and tested no
		// other code).
		if s.ID != "claude-code" {
			continue
		}
		for _, c := range jobInterruptCases {
			t.Run(s.ID+"/"+c.name, func(t *testing.T) {
				t.Parallel()
				ctx, cancel := context.WithTimeout(t.Context(), 6*time.Minute)
				defer cancel()
				f := agentclitest.NewHangingModel(t)
				home := t.TempDir()
				agentclitest.WritePiece(t, home, s.ID)
				// The piece runs on replay: the CLI's settings (OPENAI_BASE_URL…)
				// must not make Maestro pick a model of its own.
				env := append(agentclitest.ProcessEnv(t, s, proctest.NoModelEnv(home), f.URL), "MAESTRO_MODEL=replay/demo")

				dbPath := filepath.Join(home, "maestro.db")
				st, err := sqlite.Open(ctx, dbPath, sqlite.Options{})
				if err != nil {
					t.Fatal(err)
				}
				task, job, err := st.CreateTask(ctx, store.NewTask{Title: "say hello", Piece: "agent-hello", MaxAttempts: 3})
				st.Close()
				if err != nil {
					t.Fatal(err)
				}
				url, stderr, stop := startServe(ctx, t, env, "--workers", "1", "--data-dir", home)
				f.AwaitCall(t, 5*time.Minute, stderr.String)
				groups := cliGroups(t, queue.WorkDir(home, task.ID), 30*time.Second)

				if c.name == "cancel" {
					// Measured from the cancel's answer: starting the
					// `maestro tasks` process is no part of the bound.
					if out, errOut, err := tasksCLI(ctx, env, url, "cancel", "1", "--reason", c.reason); err != nil {
						t.Fatalf("tasks cancel: %v\n%s%s", err, out, errOut)
					}
					groupsGone(t, groups, time.Now(), c.within)
					stop()
				} else {
					// SIGTERM to serve (the CLI's parent), then watch the
					// group while serve shuts down: the bound is on the
					// CLI's end, not on serve's exit, which waits for
					// the job's release after it. The group lives through
					// the shutdown grace: the job gets its time to finish.
					at := time.Now()
					cli, _ := proctest.Stat(groups[0])
					serve := cli.PPID
					if cmdline, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(serve), "cmdline")); !strings.Contains(string(cmdline), "serve\x00") {
						t.Fatalf("the CLI's parent (pid %d) is not maestro serve: %q", serve, cmdline)
					}
					if err := syscall.Kill(serve, syscall.SIGTERM); err != nil {
						t.Fatalf("SIGTERM to serve (pid %d): %v", serve, err)
					}
					groupsGone(t, groups, at, c.within)
					if lived := time.Since(at); lived < queue.DefaultShutdownGrace {
						t.Errorf("the CLI's group ended %v after SIGTERM, before the shutdown grace of %v", lived, queue.DefaultShutdownGrace)
					}
					stop()
				}

				st, err = sqlite.Open(ctx, dbPath, sqlite.Options{})
				if err != nil {
					t.Fatal(err)
				}
				defer st.Close()
				got, err := st.GetJob(ctx, job.ID)
				if err != nil {
					t.Fatal(err)
				}
				evs, err := st.ReadJobEvents(ctx, job.ID, 0, store.MaxListLimit)
				if err != nil {
					t.Fatal(err)
				}
				var last store.StatusEvent
				var log strings.Builder
				interrupted := false
				for _, e := range evs {
					log.WriteString(string(e.Type) + " " + string(e.Data) + "\n")
					switch e.Type {
					case store.JobEventStatus:
						json.Unmarshal(e.Data, &last)
					case store.JobEventProtocol:
						interrupted = interrupted || strings.Contains(string(e.Data), `"error_type":"cancelled"`)
					}
				}
				if interrupted != c.interrupted {
					t.Errorf("the log records the movement's interruption: %v, want %v\nlog:\n%s", interrupted, c.interrupted, log.String())
				}
				if got.State != c.state || last.State != c.state || !strings.Contains(last.Error+" "+last.Reason, c.reason) {
					t.Errorf("job %s, last status %s (%q %q); want %s (%q)\nlog:\n%s\nserve: %s", got.State, last.State, last.Error, last.Reason, c.state, c.reason, log.String(), stderr.String())
				}
			})
		}
	}
}
