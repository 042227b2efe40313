//go:build linux

package proctest

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

func TestAlive(t *testing.T) {
	t.Parallel()
	if !Alive(os.Getpid(), 10*time.Millisecond) {
		t.Error("this process is reported gone")
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if Alive(cmd.Process.Pid, time.Second) {
		t.Error("an exited, reaped process is reported alive")
	}
}
