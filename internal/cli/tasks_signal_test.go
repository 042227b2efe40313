package cli

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Ctrl-C during `maestro tasks download` killed the process where it
// stood (the tasks commands caught no signal): the file being written
// stayed as .NAME.maestro-download, though the help promises that an
// interrupted download leaves no partial file, and the exit said nothing.
// Now the signal cancels the command: the temporary file is removed and
// the exit code is 130.
func TestTasksDownloadInterrupted(t *testing.T) {
	t.Parallel()
	bin, err := maestroBinary()
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{}, 1)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/v1/tasks/7/deliverables":
			w.Write([]byte(`{"files":[{"path":"big.bin","size":1000000}]}`))
		case "/api/v1/tasks/7/deliverables/big.bin":
			w.Header().Set("Content-Length", "1000000")
			w.Write(make([]byte, 1000))
			w.(http.Flusher).Flush()
			started <- struct{}{}
			<-r.Context().Done() // the rest never comes
		default:
			http.NotFound(w, r)
		}
	}))
	defer ts.Close()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "tasks", "download", "7", "-o", dir, "--server", ts.URL)
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	var stderr syncOut
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatalf("the download did not start: %s", stderr.String())
	}
	// downloadOne creates the temporary file before it asks for the
	// file, so it exists now.
	if _, err := os.Stat(filepath.Join(dir, ".big.bin.maestro-download")); err != nil {
		t.Fatal(err)
	}
	cmd.Process.Signal(syscall.SIGINT)
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != ExitInterrupted {
		t.Fatalf("download interrupted: %v, want exit %d\n%s", err, ExitInterrupted, stderr.String())
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("an interrupted download left %s in %s", entries[0].Name(), dir)
	}
}
