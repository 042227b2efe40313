package main

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/blobstore"
	"github.com/maestro-run/maestro/internal/blobstore/s3test"
	"github.com/maestro-run/maestro/internal/proctest"
	"github.com/maestro-run/maestro/internal/queue"
)

// summariseScenario reads the uploaded brief and writes a deliverable.
const summariseScenario = `{"schemaVersion":"evalops.maestro.scripted-scenario.v1","id":"summarise-brief","description":"summarise the brief",
"metadata":{"recordedAt":"2026-11-26T00:00:00Z","toolsExpected":["Read","Write","complete"]},
"frames":[
{"index":0,"statements":[{"kind":"tool_call","tool":"Read","input":{"path":"input/brief.txt"},"expectedResult":"success"}]},
{"index":1,"statements":[{"kind":"tool_call","tool":"Write","input":{"path":"output/summary.txt","content":"summary of the brief\n"},"expectedResult":"success"}]},
{"index":2,"statements":[{"kind":"tool_call","tool":"complete","input":{"status":"success","result":"summarised the brief"}}]}
]}`

// TestArtifactsInS3AcrossMachines (issue 21, files in a blob store):
// `serve` A runs no workers; `maestro worker` B has a data directory of
// its own; both share one PostgreSQL and one S3-compatible server
// (versitygw) through --artifacts s3://…. A task submitted through A with
// a file runs on B: the file reaches B's workspace without touching A's
// disk, and the deliverable B wrote downloads through A from the store.
func TestArtifactsInS3AcrossMachines(t *testing.T) {
	t.Parallel()
	dsn := ownPostgres(t)
	s3 := s3test.Start(t)
	bucket := s3.NewBucket(t)

	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	artifacts := "s3://" + bucket + "/maestro"
	dirA, dirB := t.TempDir(), t.TempDir()
	envA := append(proctest.NoModelEnv(filepath.Join(dirA, "home")), s3.Env()...)
	envB := append(proctest.NoModelEnv(filepath.Join(dirB, "home")), s3.Env()...)
	dataA, dataB := filepath.Join(dirA, "data"), filepath.Join(dirB, "data")

	url, stderrA, stopA := startServe(ctx, t, envA, "--workers", "0", "--db", dsn, "--data-dir", dataA, "--artifacts", artifacts)
	cmd := exec.CommandContext(ctx, binary, "worker", "--db", dsn, "--data-dir", dataB, "--artifacts", artifacts, "--name", "machineB")
	cmd.Env = envB
	b := launch(t, cmd)

	brief := filepath.Join(t.TempDir(), "brief.txt")
	if err := os.WriteFile(brief, []byte("two paragraphs\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(map[string]string{"replay": summariseScenario})
	out, errOut, err := tasksCLI(ctx, envA, url, "submit", "Summarise the brief", "--file", brief, "--payload", string(payload), "-f")
	if err != nil || !strings.Contains(out, "input/brief.txt (15 bytes)") || !strings.Contains(out, "summarised the brief") {
		t.Fatalf("submit --file -f through A: %v\nstdout:\n%s\nstderr:\n%s\nA:\n%s\nB:\n%s", err, out, errOut, stderrA.String(), b.stderr.String())
	}

	// The file reached B's scratch workspace; A's disk holds no task
	// files and no staged upload.
	if data, err := os.ReadFile(filepath.Join(queue.WorkDir(dataB, 1), "input", "brief.txt")); err != nil || string(data) != "two paragraphs\n" {
		t.Errorf("B's input/brief.txt = %q, %v", data, err)
	}
	for _, p := range []string{filepath.Join(dataA, "tasks", "1"), filepath.Join(dataA, "uploads")} {
		if ents, err := os.ReadDir(p); !errors.Is(err, fs.ErrNotExist) && len(ents) > 0 {
			t.Errorf("A's data directory holds %s (%d entries): the files should be in the store only", p, len(ents))
		}
	}

	// The store holds the input, the output and B's run logs, and no
	// staged upload is left.
	st, err := blobstore.OpenS3(ctx, s3.Config(bucket, "maestro"))
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"tasks/1/work/input/brief.txt", "tasks/1/work/output/summary.txt"} {
		if _, err := st.Stat(ctx, key); err != nil {
			t.Errorf("store: %v", err)
		}
	}
	if objs, err := st.List(ctx, "tasks/1/state"); err != nil || len(objs) == 0 {
		t.Errorf("store: tasks/1/state holds %d objects (%v), want B's run logs", len(objs), err)
	}
	if objs, err := st.List(ctx, "uploads"); err != nil || len(objs) != 0 {
		t.Errorf("store: uploads/ still holds %v (%v), want nothing once the job adopted them", objs, err)
	}

	// The deliverable B produced downloads through A.
	dl := filepath.Join(t.TempDir(), "dl")
	out, errOut, err = tasksCLI(ctx, envA, url, "download", "1", "-o", dl)
	if err != nil {
		t.Fatalf("download through A: %v\n%s\n%s", err, out, errOut)
	}
	if data, err := os.ReadFile(filepath.Join(dl, "summary.txt")); err != nil || string(data) != "summary of the brief\n" {
		t.Errorf("downloaded summary.txt = %q, %v", data, err)
	}
	stopA()
}
