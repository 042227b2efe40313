// Command artifacts measures the artifact store of issue 21 in one run and
// prints a markdown table (bench/artifacts/run.sh builds versitygw first):
//
//   - sync throughput of a 100 MB output/ (one file) to S3 (versitygw on
//     loopback, POSIX backend) and to a Local store, and of the same sync
//     when nothing changed (hash and compare only);
//   - claim-to-first-model-call latency of a job with a 1 MB uploaded
//     input: enqueue → the replay model's first call, with S3 artifacts and
//     with none (the data directory, as before), median of -jobs runs,
//     and the part of it from the claim (the job's attempted_at) on;
//   - jobs/s of trivial engine jobs (one replay turn that completes) and of
//     no-op piece jobs, S3 vs none, -jobs each.
//
// Figures are wall time on a shared machine: compare the columns of one
// run, not runs.
package main

import (
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"iter"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/maestro-run/maestro/internal/blobstore"
	"github.com/maestro-run/maestro/internal/blobstore/s3test"
	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/llm/replay"
	"github.com/maestro-run/maestro/internal/queue"
	"github.com/maestro-run/maestro/internal/staging"
	"github.com/maestro-run/maestro/internal/store"
	"github.com/maestro-run/maestro/internal/store/sqlite"
	"github.com/maestro-run/maestro/internal/workspace"
)

const trivialScenario = `{"schemaVersion":"evalops.maestro.scripted-scenario.v1","id":"trivial","description":"answer at once",
"metadata":{"recordedAt":"2026-11-26T00:00:00Z","toolsExpected":[]},
"frames":[{"index":0,"statements":[{"kind":"text","text":"done"}]}]}`

func main() {
	bin := flag.String("versitygw", ".cache/versitygw/bin/versitygw", "versitygw binary (scripts/install-s3.sh)")
	syncMB := flag.Int("sync-mb", 100, "size of the output synced, MB")
	jobs := flag.Int("jobs", 30, "jobs per latency / throughput measurement")
	flag.Parse()
	if err := run(*bin, *syncMB, *jobs); err != nil {
		fmt.Fprintln(os.Stderr, "bench/artifacts:", err)
		os.Exit(1)
	}
}

func run(bin string, syncMB, jobs int) error {
	ctx := context.Background()
	tmp, err := os.MkdirTemp("", "maestro-bench-artifacts-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	srv, err := s3test.Run(ctx, bin, tmp)
	if err != nil {
		return err
	}
	defer srv.Stop()
	newS3 := func() (blobstore.Store, error) {
		b, err := srv.MakeBucket(ctx)
		if err != nil {
			return nil, err
		}
		return blobstore.OpenS3(ctx, srv.Config(b, "bench"))
	}

	fmt.Println("| measurement | S3 (versitygw, loopback) | local (sync: Local store; jobs: no --artifacts) | S3 / local |")
	fmt.Println("|---|---|---|---|")
	// Sync of a 100 MB output.
	out := filepath.Join(tmp, "out")
	os.MkdirAll(out, 0o755)
	if err := writeRandom(filepath.Join(out, "big.bin"), int64(syncMB)<<20); err != nil {
		return err
	}
	s3, err := newS3()
	if err != nil {
		return err
	}
	local, err := blobstore.OpenLocal(filepath.Join(tmp, "local-blobs"))
	if err != nil {
		return err
	}
	var first, again [2]time.Duration
	var cpu [2]time.Duration
	for i, st := range []blobstore.Store{s3, local} {
		d, err := workspace.OpenTrusted(out)
		if err != nil {
			return err
		}
		c0 := cpuTime()
		t0 := time.Now()
		if _, err := blobstore.SyncUp(ctx, st, d, "tasks/1/work/output", true); err != nil {
			return err
		}
		first[i], cpu[i] = time.Since(t0), cpuTime()-c0
		t0 = time.Now()
		if res, err := blobstore.SyncUp(ctx, st, d, "tasks/1/work/output", true); err != nil || res.Copied != 0 {
			return fmt.Errorf("unchanged sync: %+v, %v", res, err)
		}
		again[i] = time.Since(t0)
		d.Close()
	}
	mbps := func(d time.Duration) string {
		return fmt.Sprintf("%.0f MB/s (%s)", float64(syncMB)/d.Seconds(), d.Round(time.Millisecond))
	}
	fmt.Printf("| sync %d MB output/, first | %s | %s | %.2f |\n", syncMB, mbps(first[0]), mbps(first[1]), ratio(first[0], first[1]))
	fmt.Printf("| … this process's CPU | %s | %s | %.2f |\n", cpu[0].Round(time.Millisecond), cpu[1].Round(time.Millisecond), ratio(cpu[0], cpu[1]))
	fmt.Printf("| sync again, unchanged (hash + stat) | %s | %s | %.2f |\n", again[0].Round(time.Millisecond), again[1].Round(time.Millisecond), ratio(again[0], again[1]))

	// Claim to first model call, then jobs/s.
	var lat, trivial, noop [2]string
	var latD, claimD, trivialD, noopD [2]time.Duration
	// This process's CPU per job (the worker side: the S3 client, hashing,
	// the engine; not versitygw's), which the machine's load moves less
	// than wall time.
	var trivialCPU, noopCPU [2]time.Duration
	for i := range 2 {
		var a blobstore.Store
		if i == 0 {
			if a, err = newS3(); err != nil {
				return err
			}
		}
		data := filepath.Join(tmp, fmt.Sprintf("data-%d", i))
		if latD[i], claimD[i], err = firstCallLatency(ctx, data, a, jobs); err != nil {
			return err
		}
		lat[i] = fmt.Sprintf("%s median", latD[i].Round(100*time.Microsecond))
		c0 := cpuTime()
		if trivialD[i], err = throughput(ctx, data+"-t", a, jobs, ""); err != nil {
			return err
		}
		trivialCPU[i] = (cpuTime() - c0) / time.Duration(jobs)
		trivial[i] = fmt.Sprintf("%.1f jobs/s", float64(jobs)/trivialD[i].Seconds())
		c0 = cpuTime()
		if noopD[i], err = throughput(ctx, data+"-n", a, jobs*10, queue.NoopPiece); err != nil {
			return err
		}
		noopCPU[i] = (cpuTime() - c0) / time.Duration(jobs*10)
		noop[i] = fmt.Sprintf("%.0f jobs/s", float64(jobs*10)/noopD[i].Seconds())
	}
	fmt.Printf("| enqueue → first model call (1 MB input uploaded) | %s | %s | %.2f |\n", lat[0], lat[1], ratio(latD[0], latD[1]))
	fmt.Printf("| claim → first model call (same jobs) | %s median | %s median | %.2f |\n", claimD[0].Round(100*time.Microsecond), claimD[1].Round(100*time.Microsecond), ratio(claimD[0], claimD[1]))
	fmt.Printf("| trivial engine jobs (one replay turn), %d | %s | %s | %.2f |\n", jobs, trivial[0], trivial[1], ratio(trivialD[1], trivialD[0]))
	fmt.Printf("| … this process's CPU per job | %s | %s | %.2f |\n", trivialCPU[0].Round(10*time.Microsecond), trivialCPU[1].Round(10*time.Microsecond), ratio(trivialCPU[0], trivialCPU[1]))
	fmt.Printf("| no-op piece jobs, %d | %s | %s | %.2f |\n", jobs*10, noop[0], noop[1], ratio(noopD[1], noopD[0]))
	fmt.Printf("| … this process's CPU per job | %s | %s | %.2f |\n", noopCPU[0].Round(10*time.Microsecond), noopCPU[1].Round(10*time.Microsecond), ratio(noopCPU[0], noopCPU[1]))
	fmt.Println("\n(S3 / local: time ratio for sync and latency, jobs/s ratio for throughput; one worker, SQLite store, 10 ms poll.)")
	return nil
}

func ratio(a, b time.Duration) float64 { return a.Seconds() / b.Seconds() }

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func writeRandom(p string, n int64) error {
	f, err := os.Create(p)
	if err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	for n > 0 {
		rand.Read(buf)
		m := min(n, int64(len(buf)))
		if _, err := f.Write(buf[:m]); err != nil {
			f.Close()
			return err
		}
		n -= m
	}
	return f.Close()
}

// firstCall wraps a replay provider and reports its first call.
type firstCall struct {
	*replay.Provider
	once sync.Once
	at   chan time.Time
}

func (f *firstCall) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Event, error] {
	f.once.Do(func() { f.at <- time.Now() })
	return f.Provider.Stream(ctx, req)
}

// pool starts one worker on a SQLite store in data with artifacts a.
func pool(ctx context.Context, data string, a blobstore.Store, prov func(*queue.Job) (llm.Provider, error)) (store.Store, func(), error) {
	os.MkdirAll(data, 0o755)
	st, err := sqlite.Open(ctx, filepath.Join(data, "maestro.db"), sqlite.Options{})
	if err != nil {
		return nil, nil, err
	}
	r := queue.NewEngineRunner(queue.EngineRunnerConfig{DataDir: data, Provider: prov, Artifacts: a})
	p, err := queue.NewPool(queue.Config{Store: st, Runner: r, Name: "bench", Workers: 1, Poll: 10 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, nil, err
	}
	pctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { p.Run(pctx); close(done) }()
	return st, func() { cancel(); <-done; st.Close() }, nil
}

// firstCallLatency runs n jobs with a 1 MB upload, one at a time, and
// returns the medians of enqueue → first model call and of claim (the
// job's attempted_at) → first model call: the latter is what the worker
// spends adopting the upload and materialising the workspace.
func firstCallLatency(ctx context.Context, data string, a blobstore.Store, n int) (fromEnqueue, fromClaim time.Duration, err error) {
	scen, err := replay.Parse([]byte(trivialScenario), "trivial")
	if err != nil {
		return 0, 0, err
	}
	at := make(chan time.Time, 1)
	st, stop, err := pool(ctx, data, a, func(*queue.Job) (llm.Provider, error) {
		return &firstCall{Provider: replay.New(scen), at: at}, nil
	})
	if err != nil {
		return 0, 0, err
	}
	defer stop()
	input := make([]byte, 1<<20)
	rand.Read(input)
	var lats, claims []time.Duration
	for i := range n {
		key := fmt.Sprintf("%032x", i+1)
		if a != nil {
			err = blobstore.PutBytes(ctx, a, blobstore.Join(blobstore.UploadPrefix(key), "data.bin"), input)
		} else {
			os.MkdirAll(staging.Dir(data, key), 0o755)
			err = os.WriteFile(filepath.Join(staging.Dir(data, key), "data.bin"), input, 0o644)
		}
		if err != nil {
			return 0, 0, err
		}
		t0 := time.Now()
		_, j, err := st.CreateTask(ctx, store.NewTask{Title: "bench", Payload: []byte(`{"input_staging":"` + key + `","no_piece":true}`)})
		if err != nil {
			return 0, 0, err
		}
		var called time.Time
		select {
		case called = <-at:
			lats = append(lats, called.Sub(t0))
		case <-time.After(2 * time.Minute):
			return 0, 0, fmt.Errorf("job %d made no model call within 2 minutes", j.ID)
		}
		if err := waitDone(ctx, st, j.ID); err != nil {
			return 0, 0, err
		}
		done, err := st.GetJob(ctx, j.ID)
		if err != nil {
			return 0, 0, err
		}
		claims = append(claims, called.Sub(done.AttemptedAt))
	}
	slices.Sort(lats)
	slices.Sort(claims)
	return lats[len(lats)/2], claims[len(claims)/2], nil
}

func throughput(ctx context.Context, data string, a blobstore.Store, n int, piece string) (time.Duration, error) {
	scen, err := replay.Parse([]byte(trivialScenario), "trivial")
	if err != nil {
		return 0, err
	}
	st, stop, err := pool(ctx, data, a, func(*queue.Job) (llm.Provider, error) { return replay.New(scen), nil })
	if err != nil {
		return 0, err
	}
	defer stop()
	t0 := time.Now()
	var last int64
	for range n {
		nt := store.NewTask{Title: "bench", Piece: piece}
		if piece == "" {
			nt.Payload = []byte(`{"no_piece":true}`)
		}
		_, j, err := st.CreateTask(ctx, nt)
		if err != nil {
			return 0, err
		}
		last = j.ID
	}
	for id := last - int64(n) + 1; id <= last; id++ {
		if err := waitDone(ctx, st, id); err != nil {
			return 0, err
		}
	}
	return time.Since(t0), nil
}

func waitDone(ctx context.Context, st store.Store, id int64) error {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		j, err := st.GetJob(ctx, id)
		if err != nil {
			return err
		}
		if j.State.Terminal() {
			if j.State != store.StateSucceeded {
				return fmt.Errorf("job %d ended %s: %s", id, j.State, j.Error)
			}
			return nil
		}
		time.Sleep(5 * time.Millisecond)
	}
	return fmt.Errorf("job %d not done within 2 minutes", id)
}
