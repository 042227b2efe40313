package blobstore_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"syscall"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/maestro-run/maestro/internal/blobstore"
	"github.com/maestro-run/maestro/internal/blobstore/s3test"
)

// TestIsUnavailable: what an outage of the store looks like (a refused or
// reset connection, a timeout, an S3 answer asking to come back later) is
// told apart from what is not (a missing key, a refused credential, a
// body that does not match, a cancelled call).
func TestIsUnavailable(t *testing.T) {
	t.Parallel()
	wrap := func(err error) error { return fmt.Errorf("get blob a in s3://b: %w", err) }
	timeout, cancel := context.WithTimeout(context.Background(), 0)
	defer cancel()
	<-timeout.Done()
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"refused", wrap(&url.Error{Op: "Get", URL: "http://127.0.0.1:9/b", Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}), true},
		{"reset", wrap(syscall.ECONNRESET), true},
		{"no such host", wrap(&net.DNSError{Err: "no such host", Name: "s3.invalid", IsNotFound: true}), true},
		{"closed without an answer", wrap(&url.Error{Op: "Get", URL: "http://127.0.0.1:9/b", Err: io.EOF}), true},
		{"body cut short", wrap(io.ErrUnexpectedEOF), true},
		{"deadline", wrap(timeout.Err()), true},
		{"503 SlowDown", wrap(minio.ErrorResponse{Code: "SlowDown", StatusCode: 503}), true},
		{"500", wrap(minio.ErrorResponse{Code: "Whatever", StatusCode: 500}), true},
		{"nil", nil, false},
		{"cancelled", wrap(context.Canceled), false},
		{"missing key", wrap(fmt.Errorf("%w (NoSuchKey)", blobstore.ErrNotExist)), false},
		{"access denied", wrap(minio.ErrorResponse{Code: "AccessDenied", StatusCode: 403}), false},
		{"hash mismatch", wrap(errors.New("blob body: SHA-256 00, expected 11")), false},
	}
	for _, tt := range tests {
		if got := blobstore.IsUnavailable(tt.err); got != tt.want {
			t.Errorf("%s: IsUnavailable(%v) = %v, want %v", tt.name, tt.err, got, tt.want)
		}
	}
}

// TestS3Unavailable: the errors of a real S3 store whose server stopped
// are outages; once it is started again (Restart), it answers with what
// it held.
func TestS3Unavailable(t *testing.T) {
	t.Parallel()
	srv := s3test.Start(t)
	s := srv.Open(t, "p")
	ctx := t.Context()
	if err := blobstore.PutBytes(ctx, s, "a.txt", []byte("kept\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Stat(ctx, "missing"); !blobstore.IsNotExist(err) || blobstore.IsUnavailable(err) {
		t.Fatalf("Stat of a missing key: %v, want not found and not an outage", err)
	}
	srv.Stop()
	if _, err := s.List(ctx, ""); !blobstore.IsUnavailable(err) {
		t.Errorf("List with the server stopped: %v, want an outage", err)
	}
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if data, err := blobstore.ReadAll(ctx, s, "a.txt", 100); err != nil || string(data) != "kept\n" {
		t.Errorf("a.txt after the restart = %q, %v", data, err)
	}
}
