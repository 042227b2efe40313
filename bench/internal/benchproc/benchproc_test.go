package benchproc

import (
	"context"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestKiB reads this process's resident memory and its peak, and 0 for a
// field /proc/self/status does not have.
func TestKiB(t *testing.T) {
	for _, tt := range []struct {
		field    string
		positive bool
	}{
		{"VmRSS", true},
		{"VmHWM", true},
		{"NoSuchField", false},
	} {
		if got := KiB(tt.field); (got > 0) != tt.positive {
			t.Errorf("KiB(%q) = %d, want positive %v", tt.field, got, tt.positive)
		}
	}
	if rss, peak := KiB("VmRSS"), KiB("VmHWM"); rss > peak {
		t.Errorf("VmRSS %d KiB above its peak VmHWM %d KiB", rss, peak)
	}
}

// TestServe: the handler answers at base until stop, and not after.
func TestServe(t *testing.T) {
	t.Parallel()
	base, stop, err := Serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok "+r.URL.Path)
	}))
	if err != nil {
		t.Fatal(err)
	}
	get := func() (string, error) {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/x", nil)
		if err != nil {
			return "", err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	if got, err := get(); err != nil || got != "ok /x" {
		t.Fatalf("GET %s/x = %q, %v; want \"ok /x\"", base, got, err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got, err := get(); err == nil {
		t.Fatalf("GET after stop = %q, want an error", got)
	}
}

// TestStartPiped: what is written to the child's stdin comes back on its
// stdout (cat), and a command that cannot start is an error naming it.
func TestStartPiped(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "cat")
	stdin, stdout, err := StartPiped(cmd)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(stdin, "hello\n"); err != nil {
		t.Fatal(err)
	}
	stdin.Close()
	got, err := io.ReadAll(stdout)
	if err != nil || string(got) != "hello\n" {
		t.Errorf("cat answered %q, %v; want \"hello\\n\"", got, err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "no-such-command")
	if _, _, err := StartPiped(exec.CommandContext(ctx, missing)); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("StartPiped(missing) error = %v, want one naming %s", err, missing)
	}
}
