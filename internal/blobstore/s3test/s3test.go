// Package s3test runs a real S3-compatible server for tests: versitygw with
// its POSIX backend (built by scripts/install-s3.sh into .cache/versitygw),
// on a free loopback port, over a temporary directory. When the binary is
// missing a test skips with a loud reason, or fails under CI=true
// (proctest.SkipOrFail).
package s3test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/maestro-run/maestro/internal/blobstore"
	"github.com/maestro-run/maestro/internal/proctest"
)

// BinEnv names a versitygw binary that overrides the one in the cache.
const BinEnv = "MAESTRO_VERSITYGW_BIN"

// Server is a running versitygw.
type Server struct {
	// Endpoint is its URL (http://127.0.0.1:port).
	Endpoint string
	// AccessKey and SecretKey are its root credentials.
	AccessKey, SecretKey string
	// Dir is the POSIX backend's directory (a bucket is a directory in it).
	Dir string

	cmd  *exec.Cmd
	done chan struct{}
	log  *proctest.Buffer
}

// Binary returns the versitygw binary ($MAESTRO_VERSITYGW_BIN, else
// .cache/versitygw/bin/versitygw at the module's top), or calls
// proctest.SkipOrFail.
func Binary(tb testing.TB) string {
	tb.Helper()
	bin := os.Getenv(BinEnv)
	if bin == "" {
		_, file, _, _ := runtime.Caller(0) // <module>/internal/blobstore/s3test/s3test.go
		bin = filepath.Join(filepath.Dir(file), "..", "..", "..", ".cache", "versitygw", "bin", "versitygw")
	}
	if st, err := os.Stat(bin); err != nil || st.IsDir() {
		proctest.SkipOrFail(tb, "S3-COMPATIBLE SERVER versitygw NOT BUILT at %s: run scripts/install-s3.sh (the S3 blob store tests are skipped)", bin)
		return ""
	}
	return bin
}

// Start starts a versitygw for tb, stopped when tb ends.
func Start(tb testing.TB) *Server {
	tb.Helper()
	bin := Binary(tb)
	s, err := Run(tb.Context(), bin, tb.TempDir())
	if err != nil {
		tb.Fatalf("s3test: %v", err)
	}
	tb.Cleanup(s.Stop)
	return s
}

// Run starts the versitygw binary bin over a new directory in dir and
// waits until it answers (for benchmarks; tests use Start). Stop it with
// Stop.
func Run(ctx context.Context, bin, dir string) (*Server, error) {
	var rnd [12]byte
	rand.Read(rnd[:])
	s := &Server{AccessKey: "maestro-test", SecretKey: hex.EncodeToString(rnd[:]), Dir: filepath.Join(dir, "s3"), done: make(chan struct{}), log: &proctest.Buffer{}}
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return nil, err
	}
	port, err := proctest.FreePort()
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	s.Endpoint = "http://" + addr
	s.cmd = exec.Command(bin, "--port", addr, "--access", s.AccessKey, "--secret", s.SecretKey, "posix", s.Dir)
	s.cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.start(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// start starts s.cmd and waits until the server answers.
func (s *Server) start(ctx context.Context) error {
	cmd, done := s.cmd, s.done
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	go func() { cmd.Wait(); close(done) }()
	if err := s.waitReady(ctx, 30*time.Second); err != nil {
		s.Stop()
		return fmt.Errorf("versitygw on %s: %w; its output:\n%s", s.Endpoint, err, s.log.String())
	}
	return nil
}

// Restart starts a server stopped with Stop again, on the same port, with
// the same keys and over the same directory (its buckets and objects are
// kept): an outage of the store, over.
func (s *Server) Restart(ctx context.Context) error {
	s.Stop()
	old := s.cmd
	s.cmd = exec.Command(old.Path, old.Args[1:]...)
	s.cmd.Env, s.cmd.Stdout, s.cmd.Stderr = old.Env, old.Stdout, old.Stderr
	s.done = make(chan struct{})
	return s.start(ctx)
}

// waitReady polls the endpoint until it answers HTTP (any status).
func (s *Server) waitReady(ctx context.Context, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.Endpoint+"/", nil)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			return nil
		}
		select {
		case <-s.done:
			return fmt.Errorf("exited before it was ready")
		case <-ctx.Done():
			return fmt.Errorf("not ready within %v", limit)
		case <-tick.C:
		}
	}
}

// Stop ends the server and waits for it (at most ten seconds); its port
// then refuses connections until Restart.
func (s *Server) Stop() {
	if s.cmd.Process == nil {
		return
	}
	s.cmd.Process.Kill()
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
	}
}

// Env is the environment that points an S3 store at the server
// (AWS_ENDPOINT_URL, the keys, a region).
func (s *Server) Env() []string {
	return []string{
		blobstore.EnvEndpoint + "=" + s.Endpoint,
		blobstore.EnvAccessKey + "=" + s.AccessKey,
		blobstore.EnvSecretKey + "=" + s.SecretKey,
		blobstore.EnvRegion + "=us-east-1",
	}
}

// Config is an S3Config of the bucket on the server.
func (s *Server) Config(bucket, prefix string) blobstore.S3Config {
	return blobstore.S3Config{Bucket: bucket, Prefix: prefix, Endpoint: s.Endpoint, Region: "us-east-1", AccessKey: s.AccessKey, SecretKey: s.SecretKey}
}

// NewBucket creates a bucket with a fresh name and returns its name.
func (s *Server) NewBucket(tb testing.TB) string {
	tb.Helper()
	name, err := s.MakeBucket(tb.Context())
	if err != nil {
		tb.Fatalf("s3test: %v", err)
	}
	return name
}

// MakeBucket creates a bucket with a fresh name and returns its name.
func (s *Server) MakeBucket(ctx context.Context) (string, error) {
	var rnd [6]byte
	rand.Read(rnd[:])
	name := "maestro-" + hex.EncodeToString(rnd[:])
	c, err := minio.New(s.Endpoint[len("http://"):], &minio.Options{Creds: credentials.NewStaticV4(s.AccessKey, s.SecretKey, ""), Region: "us-east-1", BucketLookup: minio.BucketLookupPath})
	if err != nil {
		return "", fmt.Errorf("client: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := c.MakeBucket(ctx, name, minio.MakeBucketOptions{Region: "us-east-1"}); err != nil {
		return "", fmt.Errorf("create bucket %s: %w; server output:\n%s", name, err, s.log.String())
	}
	return name, nil
}

// Open opens an S3 store on a new bucket of the server.
func (s *Server) Open(tb testing.TB, prefix string) *blobstore.S3 {
	tb.Helper()
	st, err := blobstore.OpenS3(tb.Context(), s.Config(s.NewBucket(tb), prefix))
	if err != nil {
		tb.Fatalf("s3test: open the store: %v", err)
	}
	return st
}
