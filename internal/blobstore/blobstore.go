// Package blobstore keeps the files a queued job needs beyond one machine's
// disk: the uploads staged with a task, and what its runs produce (output/,
// subtasks/, logs). One small interface (Store: put, get, stat, list,
// delete by key, streaming) has two implementations: Local, a directory
// (the default: one machine, serve's data directory), and S3, any
// S3-compatible service (`--artifacts s3://bucket/prefix`,
// docs/scale-out.md, "Artifacts").
//
// Every object carries its size and SHA-256, so that Sync* sends only the
// files that changed and every copy is checked on arrival.
package blobstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/maestro-run/maestro/internal/workspace"
)

// ErrNotExist matches the error of a key the store does not hold.
var ErrNotExist = fs.ErrNotExist

// Info describes one object.
type Info struct {
	// Key is the object's key (slash-separated, relative to the store).
	Key string
	// Size is its length in bytes.
	Size int64
	// SHA256 is the lowercase hex SHA-256 of its content. List leaves it
	// empty when the store cannot say without a request per object; Stat
	// and Get always fill it.
	SHA256 string
	// Modified is when it was last written.
	Modified time.Time
}

// Store holds objects by key. Keys are slash-separated relative paths
// (CheckKey). Implementations are safe for concurrent use; a Put replaces
// an object as a whole (a reader sees the old or the new content, never
// a mix).
type Store interface {
	// Put stores size bytes from r under key. sum is the hex SHA-256 of
	// those bytes; a body of another length or hash is refused and not
	// kept.
	Put(ctx context.Context, key string, r io.Reader, size int64, sum string) error
	// Get opens the object key for reading (seekable: deliverables are
	// served with ranges). The caller closes it.
	Get(ctx context.Context, key string) (io.ReadSeekCloser, Info, error)
	// Stat describes the object key; an error matching ErrNotExist when
	// there is none.
	Stat(ctx context.Context, key string) (Info, error)
	// List returns the objects whose keys start with prefix + "/" (all
	// of them for an empty prefix), sorted by key.
	List(ctx context.Context, prefix string) ([]Info, error)
	// Delete removes the object key; a missing one is not an error.
	Delete(ctx context.Context, key string) error
	// Location names the store for messages and logs (a directory, or
	// s3://bucket/prefix).
	Location() string
}

// tmpPrefix begins the names of Local's temporary files; no key component
// may begin with it.
const tmpPrefix = ".blob-"

// CheckKey returns the cleaned key, or an error saying which rule key
// breaks (CheckSlashPath's, and no component beginning with ".blob-").
func CheckKey(key string) (string, error) {
	c, broken := workspace.CheckSlashPath(key)
	if broken != "" {
		return "", fmt.Errorf("blob key %s: expected a relative slash-separated path, %s", workspace.Excerpt(key), broken)
	}
	for seg := range strings.SplitSeq(c, "/") {
		if strings.HasPrefix(seg, tmpPrefix) {
			return "", fmt.Errorf("blob key %s: no component may begin with %q", workspace.Excerpt(key), tmpPrefix)
		}
	}
	return c, nil
}

// Join joins key components with "/", leaving out empty ones.
func Join(parts ...string) string {
	var b []string
	for _, p := range parts {
		if p = strings.Trim(p, "/"); p != "" {
			b = append(b, p)
		}
	}
	return strings.Join(b, "/")
}

// checkedReader hashes and counts what is read through it, and fails the
// read that ends the stream when the length or hash is not the expected
// one (so a store never commits a body that does not match).
type checkedReader struct {
	r    io.Reader
	h    hashState
	n    int64
	size int64
	sum  string
}

type hashState interface {
	io.Writer
	Sum([]byte) []byte
}

func newCheckedReader(r io.Reader, size int64, sum string) *checkedReader {
	return &checkedReader{r: r, h: sha256.New(), size: size, sum: strings.ToLower(sum)}
}

func (c *checkedReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.h.Write(p[:n])
	c.n += int64(n)
	if c.n > c.size {
		return n, fmt.Errorf("blob body: more than the %d bytes announced", c.size)
	}
	if err == io.EOF {
		if verr := c.verify(); verr != nil {
			return n, verr
		}
	}
	return n, err
}

// verify checks the length and hash of what was read.
func (c *checkedReader) verify() error {
	if c.n != c.size {
		return fmt.Errorf("blob body: %d bytes, expected %d", c.n, c.size)
	}
	if got := hex.EncodeToString(c.h.Sum(nil)); got != c.sum {
		return fmt.Errorf("blob body: SHA-256 %s, expected %s", got, c.sum)
	}
	return nil
}

// checkSum validates a hex SHA-256 given to Put.
func checkSum(sum string) error {
	if len(sum) != 64 {
		return fmt.Errorf("blob checksum %q: expected 64 hex digits of SHA-256", sum)
	}
	if _, err := hex.DecodeString(sum); err != nil {
		return fmt.Errorf("blob checksum %q: expected 64 hex digits of SHA-256", sum)
	}
	return nil
}

// HashReader returns the length and hex SHA-256 of what r yields.
func HashReader(r io.Reader) (int64, string, error) {
	h := sha256.New()
	n, err := io.Copy(h, r)
	if err != nil {
		return n, "", err
	}
	return n, hex.EncodeToString(h.Sum(nil)), nil
}

// PutBytes stores data under key.
func PutBytes(ctx context.Context, s Store, key string, data []byte) error {
	sum := sha256.Sum256(data)
	return s.Put(ctx, key, strings.NewReader(string(data)), int64(len(data)), hex.EncodeToString(sum[:]))
}

// ReadAll returns the content of the object key, at most max bytes.
func ReadAll(ctx context.Context, s Store, key string, max int64) ([]byte, error) {
	r, info, err := s.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	if info.Size > max {
		return nil, fmt.Errorf("blob %s: %d bytes, expected at most %d", key, info.Size, max)
	}
	return io.ReadAll(io.LimitReader(r, max))
}

// IsNotExist reports whether err says a key is missing.
func IsNotExist(err error) bool { return errors.Is(err, ErrNotExist) }

// IsUnavailable reports whether err says the store could not be reached
// or did not answer usefully, for a while, whatever was asked: a refused,
// reset or timed-out connection, a name that does not resolve, a body cut
// short, or an S3 answer that asks to come back later (5xx, SlowDown, …).
// Such a failure is an outage of the store, not a fault of the data: a job
// that meets it is given back rather than failed (internal/queue). A
// missing key, a refused credential or a hash that does not match are not
// outages. A cancelled context is not either; a deadline (a call that took
// too long) is.
func IsUnavailable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || IsNotExist(err) {
		return false
	}
	var op *net.OpError
	var dns *net.DNSError
	var ne net.Error
	switch {
	case errors.As(err, &op), errors.As(err, &dns):
		return true
	case errors.As(err, &ne) && ne.Timeout():
		return true
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return true
	}
	var ue *url.Error
	if errors.As(err, &ue) && errors.Is(ue.Err, io.EOF) {
		return true // the server closed the connection without answering
	}
	var resp minio.ErrorResponse
	if errors.As(err, &resp) {
		switch resp.Code {
		case "SlowDown", "SlowDownRead", "SlowDownWrite", "ServiceUnavailable", "InternalError", "RequestTimeout", "Throttling", "RequestLimitExceeded":
			return true
		}
		return resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusRequestTimeout
	}
	return false
}
