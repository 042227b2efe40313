package proctest

import (
	"bufio"
	"context"
	"os/exec"
	"regexp"
	"syscall"
	"testing"
	"time"
)

// serveStopTimeout bounds how long StartServe's stop waits for the exit.
const serveStopTimeout = 30 * time.Second

// StartServe starts `<binary> serve --listen 127.0.0.1:0 args…` with env
// and returns the URL it prints, its stderr and stop, which sends SIGTERM
// and expects exit 0 within 30 s (also run at cleanup). ctx bounds the
// process and the wait for its URL.
func StartServe(ctx context.Context, t testing.TB, binary string, env []string, args ...string) (url string, stderr *Buffer, stop func()) {
	t.Helper()
	serve := exec.CommandContext(ctx, binary, append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)...)
	serve.Env = env
	stdout, err := serve.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr = &Buffer{}
	serve.Stderr = stderr
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		serve.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- serve.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve exited with %v\n%s", err, stderr.String())
			}
		case <-time.After(serveStopTimeout):
			serve.Process.Kill()
			t.Errorf("serve did not stop within %v of SIGTERM\n%s", serveStopTimeout, stderr.String())
		}
	}
	t.Cleanup(stop)
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		re := regexp.MustCompile(`http://127\.0\.0\.1:\d+`)
		for sc.Scan() {
			if u := re.FindString(sc.Text()); u != "" {
				select {
				case urls <- u:
				default:
				}
			}
		}
	}()
	select {
	case url = <-urls:
	case <-ctx.Done():
		t.Fatalf("serve did not print its URL:\n%s", stderr.String())
	}
	return url, stderr, stop
}
