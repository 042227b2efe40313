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
	m := newS3Machines(t)
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	dsn, s3, bucket, artifacts := m.dsn, m.s3, m.bucket, m.artifacts
	envA, envB, dataA, dataB := m.envA, m.envB, m.dataA, m.dataB

	url, stderrA, stopA := startServe(ctx, t, envA, "--workers", "0", "--db", dsn, "--data-dir", dataA, "--artifacts", artifacts)
	cmd := exec.CommandContext(ctx, binary, "worker", "--db", dsn, "--data-dir", dataB, "--artifacts", artifacts, "--name", "machineB")
	cmd.Env = envB
	b := launch(t, cmd)

	out, errOut, err := submitBrief(ctx, t, envA, url)
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

// s3Machines is the set-up of two machines, A and B, sharing one
// PostgreSQL database and one S3 bucket: each has its own home and data
// directory, and the S3 server's keys in its environment.
type s3Machines struct {
	dsn, bucket, artifacts string
	s3                     *s3test.Server
	dirA, dirB             string
	envA, envB             []string
	dataA, dataB           string
}

func newS3Machines(t *testing.T) s3Machines {
	t.Helper()
	m := s3Machines{dsn: ownPostgres(t), s3: s3test.Start(t), dirA: t.TempDir(), dirB: t.TempDir()}
	m.bucket = m.s3.NewBucket(t)
	m.artifacts = "s3://" + m.bucket + "/maestro"
	m.envA = append(proctest.NoModelEnv(filepath.Join(m.dirA, "home")), m.s3.Env()...)
	m.envB = append(proctest.NoModelEnv(filepath.Join(m.dirB, "home")), m.s3.Env()...)
	m.dataA, m.dataB = filepath.Join(m.dirA, "data"), filepath.Join(m.dirB, "data")
	return m
}

// submitBrief writes a 15-byte brief.txt and submits, through the serve at
// url, a task that uploads it and replays summariseScenario over it,
// following it to its end (tasks submit --file … -f).
func submitBrief(ctx context.Context, t *testing.T, env []string, url string) (stdout, stderr string, err error) {
	t.Helper()
	brief := filepath.Join(t.TempDir(), "brief.txt")
	if err := os.WriteFile(brief, []byte("two paragraphs\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(map[string]string{"replay": summariseScenario})
	return tasksCLI(ctx, env, url, "submit", "Summarise the brief", "--file", brief, "--payload", string(payload), "-f")
}
