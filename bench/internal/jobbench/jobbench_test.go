package jobbench

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestLatency enqueues paced jobs, starts some of them (one twice) and
// checks the quantiles, and that a job that never started is an error.
func TestLatency(t *testing.T) {
	tests := []struct {
		name    string
		started []int // seqs whose run starts, in order
		wantErr string
	}{
		{name: "all started", started: []int{1, 2, 3, 3}},
		{name: "one never started", started: []int{1, 3}, wantErr: "claim-latency job 2 never started"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var l Latency
			var seqs []int
			err := l.Enqueue(t.Context(), 3, 1000, func(_ context.Context, seq int) error {
				seqs = append(seqs, seq)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(seqs) != 3 || seqs[0] != 1 || seqs[2] != 3 {
				t.Fatalf("enqueued seqs %v, want 1 2 3", seqs)
			}
			for _, s := range tt.started {
				l.Started(s)
			}
			l.Started(99) // not a latency job: ignored
			var r Result
			err = l.Quantiles(&r, 1000)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("Quantiles error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.LatJobs != 3 || r.LatRate != 1000 || r.LatP50US < 0 || r.LatP50US > r.LatP99US || r.LatP99US > r.LatMaxUS {
				t.Fatalf("result %+v: want 3 jobs at 1000/s and p50 ≤ p99 ≤ max", r)
			}
		})
	}
}

// TestAppend writes two result lines to a file and one to stdout.
func TestAppend(t *testing.T) {
	path := t.TempDir() + "/results.jsonl"
	var stdout bytes.Buffer
	for _, sys := range []string{"maestro", "river"} {
		if err := Append(&stdout, path, Result{System: sys, Backend: "postgres"}); err != nil {
			t.Fatal(err)
		}
	}
	if stdout.Len() != 0 {
		t.Fatalf("stdout got %q with a path given", stdout.String())
	}
	if err := Append(&stdout, "", Result{System: "maestro-store"}); err != nil {
		t.Fatal(err)
	}
	var r Result
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil || r.System != "maestro-store" || !strings.HasSuffix(stdout.String(), "}\n") {
		t.Fatalf("stdout line %q: %v", stdout.String(), err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 2 || !strings.Contains(lines[1], `"system":"river"`) {
		t.Fatalf("results file %q: want two lines, river last", data)
	}
}

// TestReadCPU: the process's CPU time grows with work, and a pid file
// (here naming this process, whose children are none) adds a server time.
func TestReadCPU(t *testing.T) {
	pidfile := filepath.Join(t.TempDir(), "postmaster.pid")
	if err := os.WriteFile(pidfile, []byte(strconv.Itoa(os.Getpid())+"\n/data\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// /proc counts in 10 ms ticks: work until one shows (bounded).
	var got CPU
	sum := 0
	for deadline := time.Now().Add(10 * time.Second); got.Server == 0 && time.Now().Before(deadline); {
		for i := range 1_000_000 {
			sum += i % 7
		}
		var err error
		if got, err = ReadCPU(pidfile); err != nil {
			t.Fatal(err)
		}
	}
	if got.Client <= 0 || got.Server <= 0 || sum < 0 {
		t.Fatalf("ReadCPU = %+v, want both positive", got)
	}
	if _, err := ReadCPU(filepath.Join(t.TempDir(), "missing.pid")); err == nil {
		t.Error("ReadCPU(missing pid file): no error")
	}
	noServer, err := ReadCPU("")
	if err != nil || noServer.Server != 0 {
		t.Errorf("ReadCPU(\"\") = %+v, %v; want no server time", noServer, err)
	}
	var r Result
	r.CPUPerJob(CPU{Client: time.Second, Server: 2 * time.Second}, CPU{Client: 3 * time.Second, Server: 6 * time.Second}, 1000)
	if r.ClientCPUUSPerJob != 2000 || r.ServerCPUUSPerJob != 4000 {
		t.Errorf("CPUPerJob = client %v, server %v µs; want 2000, 4000", r.ClientCPUUSPerJob, r.ServerCPUUSPerJob)
	}
}
