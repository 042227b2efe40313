package blobstore_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/maestro-run/maestro/internal/blobstore"
	"github.com/maestro-run/maestro/internal/blobstore/s3test"
	"github.com/maestro-run/maestro/internal/workspace"
)

// stores are the implementations the conformance suite runs against: a
// directory, and a real S3-compatible server (versitygw) with and without
// a key prefix.
func stores(parent *testing.T) map[string]func(t *testing.T) blobstore.Store {
	var srv *s3test.Server
	s3 := func(prefix string) func(t *testing.T) blobstore.Store {
		return func(t *testing.T) blobstore.Store {
			s3test.Binary(t) // skips this store only when it is missing
			if srv == nil {
				srv = s3test.Start(parent) // shared by the S3 stores
			}
			return srv.Open(t, prefix)
		}
	}
	return map[string]func(t *testing.T) blobstore.Store{
		"local": func(t *testing.T) blobstore.Store {
			l, err := blobstore.OpenLocal(filepath.Join(t.TempDir(), "blobs"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Close() })
			return l
		},
		"s3":        s3(""),
		"s3-prefix": s3("team/artifacts"),
	}
}

func sum(data string) string {
	s := sha256.Sum256([]byte(data))
	return hex.EncodeToString(s[:])
}

func TestConformance(t *testing.T) {
	names := []string{"local", "s3", "s3-prefix"}
	open := stores(t)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			s := open[name](t)
			ctx := t.Context()
			t.Run("PutGetStat", func(t *testing.T) { putGetStat(ctx, t, s) })
			t.Run("RefusesMismatch", func(t *testing.T) { refusesMismatch(ctx, t, s) })
			t.Run("ListDelete", func(t *testing.T) { listDelete(ctx, t, s) })
			t.Run("BadKeys", func(t *testing.T) { badKeys(ctx, t, s) })
			t.Run("Sync", func(t *testing.T) { syncBothWays(ctx, t, s) })
		})
	}
}

func putGetStat(ctx context.Context, t *testing.T, s blobstore.Store) {
	const body = "hello, blob store"
	if err := blobstore.PutBytes(ctx, s, "pg/a/b.txt", []byte(body)); err != nil {
		t.Fatal(err)
	}
	info, err := s.Stat(ctx, "pg/a/b.txt")
	if err != nil {
		t.Fatal(err)
	}
	if info.Key != "pg/a/b.txt" || info.Size != int64(len(body)) || info.SHA256 != sum(body) || info.Modified.IsZero() {
		t.Fatalf("Stat = %+v, want key pg/a/b.txt, size %d, sha %s, a time", info, len(body), sum(body))
	}
	r, ginfo, err := s.Get(ctx, "pg/a/b.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if ginfo.SHA256 != info.SHA256 || ginfo.Size != info.Size {
		t.Fatalf("Get info %+v, Stat %+v", ginfo, info)
	}
	if _, err := r.Seek(7, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(r)
	if err != nil || string(got) != body[7:] {
		t.Fatalf("read after Seek(7) = %q, %v; want %q", got, err, body[7:])
	}
	// A second Put replaces the object.
	if err := blobstore.PutBytes(ctx, s, "pg/a/b.txt", []byte("v2")); err != nil {
		t.Fatal(err)
	}
	if data, err := blobstore.ReadAll(ctx, s, "pg/a/b.txt", 100); err != nil || string(data) != "v2" {
		t.Fatalf("after replace: %q, %v", data, err)
	}
	if _, err := s.Stat(ctx, "pg/none"); !blobstore.IsNotExist(err) {
		t.Fatalf("Stat of a missing key: %v, want ErrNotExist", err)
	}
	if _, _, err := s.Get(ctx, "pg/none"); !blobstore.IsNotExist(err) {
		t.Fatalf("Get of a missing key: %v, want ErrNotExist", err)
	}
}

func refusesMismatch(ctx context.Context, t *testing.T, s blobstore.Store) {
	for _, tc := range []struct {
		name, body string
		size       int64
		sum        string
	}{
		{"wrong hash", "abc", 3, sum("abd")},
		{"short body", "ab", 3, sum("ab")},
		{"long body", "abcd", 3, sum("abcd")},
		{"not a hash", "abc", 3, "xyz"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := "mm/" + strings.ReplaceAll(tc.name, " ", "-")
			if err := s.Put(ctx, key, strings.NewReader(tc.body), tc.size, tc.sum); err == nil {
				t.Fatal("Put succeeded, want an error")
			}
			if _, err := s.Stat(ctx, key); !blobstore.IsNotExist(err) {
				t.Fatalf("after a refused Put, Stat = %v, want ErrNotExist", err)
			}
		})
	}
}

func listDelete(ctx context.Context, t *testing.T, s blobstore.Store) {
	for _, k := range []string{"ld/x/2", "ld/x/1", "ld/x/sub/3", "ld/xy/4", "ld/x0"} {
		if err := blobstore.PutBytes(ctx, s, k, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	keys := func(prefix string) []string {
		infos, err := s.List(ctx, prefix)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, i := range infos {
			if i.Size != int64(len(i.Key)) {
				t.Errorf("List: %s has size %d, want %d", i.Key, i.Size, len(i.Key))
			}
			out = append(out, i.Key)
		}
		return out
	}
	if got, want := keys("ld/x"), []string{"ld/x/1", "ld/x/2", "ld/x/sub/3"}; !slices.Equal(got, want) {
		t.Fatalf("List(ld/x) = %v, want %v", got, want)
	}
	if got := keys("ld/none"); len(got) != 0 {
		t.Fatalf("List of an empty prefix = %v", got)
	}
	if err := s.Delete(ctx, "ld/x/sub/3"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "ld/x/sub/3"); err != nil {
		t.Fatalf("deleting a missing key: %v, want nil", err)
	}
	if got, want := keys("ld/x"), []string{"ld/x/1", "ld/x/2"}; !slices.Equal(got, want) {
		t.Fatalf("after Delete, List(ld/x) = %v, want %v", got, want)
	}
}

func badKeys(ctx context.Context, t *testing.T, s blobstore.Store) {
	for _, k := range []string{"", "../x", "/abs", "a/../../x", `a\b`, "a/.blob-tmp"} {
		if err := blobstore.PutBytes(ctx, s, k, []byte("x")); err == nil {
			t.Errorf("Put(%q) succeeded, want an error", k)
		}
		if _, err := s.Stat(ctx, k); err == nil {
			t.Errorf("Stat(%q) succeeded, want an error", k)
		}
	}
}

// syncBothWays: SyncUp sends what changed only, mirrors deletions;
// SyncDown fetches what differs only.
func syncBothWays(ctx context.Context, t *testing.T, s blobstore.Store) {
	src := t.TempDir()
	write := func(dir, rel, data string) {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(src, "report.md", "# report")
	write(src, "data/big.bin", strings.Repeat("x", 1<<20))
	write(src, "data/small.txt", "small")
	os.Symlink("/etc/passwd", filepath.Join(src, "link"))
	d := openDir(t, src)
	up := func(want blobstore.SyncStats) {
		t.Helper()
		got, err := blobstore.SyncUp(ctx, s, d, "sync/out", true)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("SyncUp = %+v, want %+v", got, want)
		}
	}
	up(blobstore.SyncStats{Copied: 3, Bytes: 8 + 1<<20 + 5})
	up(blobstore.SyncStats{Unchanged: 3})
	write(src, "data/small.txt", "SMALL") // same size, other content
	up(blobstore.SyncStats{Copied: 1, Bytes: 5, Unchanged: 2})
	os.Remove(filepath.Join(src, "report.md"))
	up(blobstore.SyncStats{Unchanged: 2, Deleted: 1})

	dst := t.TempDir()
	write(dst, "data/small.txt", "small") // stale
	dd := openDir(t, dst)
	got, err := blobstore.SyncDown(ctx, s, "sync/out", dd)
	if err != nil {
		t.Fatal(err)
	}
	if want := (blobstore.SyncStats{Copied: 2, Bytes: 1<<20 + 5}); got != want {
		t.Fatalf("SyncDown = %+v, want %+v", got, want)
	}
	for rel, want := range map[string]string{"data/small.txt": "SMALL", "data/big.bin": strings.Repeat("x", 1<<20)} {
		data, err := os.ReadFile(filepath.Join(dst, rel))
		if err != nil || string(data) != want {
			t.Fatalf("%s after SyncDown: %d bytes, %v", rel, len(data), err)
		}
	}
	if got, err = blobstore.SyncDown(ctx, s, "sync/out", dd); err != nil || got != (blobstore.SyncStats{Unchanged: 2}) {
		t.Fatalf("second SyncDown = %+v, %v; want 2 unchanged", got, err)
	}
}

func openDir(t *testing.T, dir string) *workspace.Dir {
	d, err := workspace.OpenTrusted(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// TestLocalStaysInside: a link planted in the directory does not lead a
// key outside it.
func TestLocalStaysInside(t *testing.T) {
	base := t.TempDir()
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o644)
	l, err := blobstore.OpenLocal(filepath.Join(base, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := os.Symlink(outside, filepath.Join(base, "blobs", "out")); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Stat(t.Context(), "out/secret"); err == nil {
		t.Fatal("Stat through a planted link succeeded")
	}
	if err := blobstore.PutBytes(t.Context(), l, "out/new", []byte("x")); err == nil {
		t.Fatal("Put through a planted link succeeded")
	}
	if _, err := os.Stat(filepath.Join(outside, "new")); err == nil {
		t.Fatal("a file was written outside the blob directory")
	}
}

// TestLocalOwnerOnly: a local store's directories and objects (tasks'
// uploads and deliverables) are its owner's only, in a parent others can
// list. They were 0755 and 0644: every local user read them.
func TestLocalOwnerOnly(t *testing.T) {
	t.Parallel()
	base := filepath.Join(t.TempDir(), "srv")
	if err := os.Mkdir(base, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(base, "artifacts")
	l, err := blobstore.OpenLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := blobstore.PutBytes(t.Context(), l, "tasks/1/work/input/report.txt", []byte("figures")); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]fs.FileMode{
		dir: 0o700, filepath.Join(dir, "tasks"): 0o700, filepath.Join(dir, "tasks", "1", "work", "input"): 0o700,
		filepath.Join(dir, "tasks", "1", "work", "input", "report.txt"): 0o600,
	} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: %v, %v; want mode %v", p, fi.Mode(), err, want)
		}
	}
}

func TestParseS3URL(t *testing.T) {
	for _, tc := range []struct {
		in, bucket, prefix string
		ok                 bool
	}{
		{"s3://b", "b", "", true},
		{"s3://b/", "b", "", true},
		{"s3://b/team/x/", "b", "team/x", true},
		{"s3:///x", "", "", false},
		{"http://b/x", "", "", false},
		{"s3://b/x?y=1", "", "", false},
		{"s3://b/../x", "", "", false},
		{"b/x", "", "", false},
	} {
		b, p, err := blobstore.ParseS3URL(tc.in, "--artifacts")
		if (err == nil) != tc.ok || b != tc.bucket || p != tc.prefix {
			t.Errorf("ParseS3URL(%q) = %q, %q, %v; want %q, %q, ok %v", tc.in, b, p, err, tc.bucket, tc.prefix, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "--artifacts") {
			t.Errorf("ParseS3URL(%q) error %q does not name the flag", tc.in, err)
		}
	}
}

func TestS3ConfigFromEnvNamesTheVariable(t *testing.T) {
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	if _, err := blobstore.S3ConfigFromEnv(blobstore.S3Config{Bucket: "b"}, getenv, "--artifacts s3://b"); err == nil || !strings.Contains(err.Error(), "AWS_ACCESS_KEY_ID") {
		t.Fatalf("without keys: %v, want an error naming AWS_ACCESS_KEY_ID", err)
	}
	env["AWS_ACCESS_KEY_ID"] = "k"
	if _, err := blobstore.S3ConfigFromEnv(blobstore.S3Config{Bucket: "b"}, getenv, "--artifacts s3://b"); err == nil || !strings.Contains(err.Error(), "AWS_SECRET_ACCESS_KEY") {
		t.Fatalf("without the secret: %v, want an error naming AWS_SECRET_ACCESS_KEY", err)
	}
	env["AWS_SECRET_ACCESS_KEY"] = "s"
	env["AWS_ENDPOINT_URL"] = "http://generic"
	env["AWS_ENDPOINT_URL_S3"] = "http://s3-specific"
	env["AWS_DEFAULT_REGION"] = "eu-west-1"
	cfg, err := blobstore.S3ConfigFromEnv(blobstore.S3Config{Bucket: "b"}, getenv, "x")
	if err != nil || cfg.Endpoint != "http://s3-specific" || cfg.Region != "eu-west-1" || cfg.AccessKey != "k" || cfg.SecretKey != "s" {
		t.Fatalf("S3ConfigFromEnv = %+v, %v", cfg, err)
	}
	cfg, _ = blobstore.S3ConfigFromEnv(blobstore.S3Config{Bucket: "b", Endpoint: "http://from-config"}, getenv, "x")
	if cfg.Endpoint != "http://from-config" {
		t.Fatalf("config endpoint replaced by the environment's: %q", cfg.Endpoint)
	}
}

// TestLocalPutBesideEmptyingDelete: a Delete that empties a directory
// removes it, and a Put into that directory at the same moment (between
// creating the directory and creating its temporary file there) must
// still succeed. The queue does this: a worker adopting a staged upload
// deletes its files while the server writes the upload's job key beside
// them (CI saw "put blob uploads/….job: openat uploads/.blob-…: no such
// file or directory").
func TestLocalPutBesideEmptyingDelete(t *testing.T) {
	t.Parallel()
	l, err := blobstore.OpenLocal(filepath.Join(t.TempDir(), "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := t.Context()
	const rounds = 1000
	errs := make(chan error, 1)
	go func() {
		defer close(errs)
		for i := range rounds {
			key := "a/b/gone-" + strconv.Itoa(i)
			if err := blobstore.PutBytes(ctx, l, key, []byte("x")); err != nil {
				errs <- err
				return
			}
			if err := l.Delete(ctx, key); err != nil {
				errs <- err
				return
			}
		}
	}()
	for i := range rounds {
		key := "a/b/kept-" + strconv.Itoa(i)
		if err := blobstore.PutBytes(ctx, l, key, []byte("y")); err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		if err := l.Delete(ctx, key); err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
	}
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
}

// TestOpenS3SaysWhyTheBucketCannotBeOpened: keys the server refuses are
// named as such, with the variables to check, and only a bucket that is
// really missing is said not to exist. An unknown access key read as a
// missing bucket (versitygw answers its HEAD 404), and the operator was
// told to create a bucket that existed.
func TestOpenS3SaysWhyTheBucketCannotBeOpened(t *testing.T) {
	s3test.Binary(t)
	srv := s3test.Start(t)
	bucket := srv.NewBucket(t)
	for name, c := range map[string]struct {
		cfg        func(*blobstore.S3Config)
		want, dont string
	}{
		"unknown access key": {func(c *blobstore.S3Config) { c.AccessKey = "nobody" }, "AWS_SECRET_ACCESS_KEY", "does not exist"},
		"wrong secret":       {func(c *blobstore.S3Config) { c.SecretKey = "wrong" }, "AWS_ACCESS_KEY_ID", "does not exist"},
		"missing bucket":     {func(c *blobstore.S3Config) { c.Bucket = "no-such-bucket" }, `"no-such-bucket" at ` + srv.Endpoint + " does not exist: create it first", "credentials"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := srv.Config(bucket, "p")
			c.cfg(&cfg)
			_, err := blobstore.OpenS3(t.Context(), cfg)
			if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), c.dont) {
				t.Fatalf("OpenS3: %v; want an error saying %q, not %q", err, c.want, c.dont)
			}
		})
	}
	if _, err := blobstore.OpenS3(t.Context(), srv.Config(bucket, "p")); err != nil {
		t.Fatalf("OpenS3 with the right keys: %v", err)
	}
}
