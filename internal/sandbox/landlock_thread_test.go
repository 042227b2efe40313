package sandbox

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestGoOffLeader: the function that enforces the Landlock domain never
// runs on the thread-group leader, the thread a signal or ptrace aimed at
// the helper's pid is checked against. The handover case is forced with a
// leader test that says yes.
func TestGoOffLeader(t *testing.T) {
	t.Parallel()
	type where struct{ tid, outer int }
	cases := []struct {
		name     string
		onLeader bool
	}{
		{"not on the leader", false},
		{"handed over from the leader", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for range 50 {
				outer := make(chan int, 1)
				got := make(chan where, 1)
				goOffLeaderCheck(func() {
					o := 0
					select {
					case o = <-outer:
					default:
					}
					got <- where{unix.Gettid(), o}
				}, func() bool {
					outer <- unix.Gettid()
					if !c.onLeader {
						<-outer // the function runs here: nothing handed over
					}
					return c.onLeader || isLeaderThread()
				})
				w := <-got
				if w.tid == unix.Getpid() {
					t.Fatalf("ran on the thread-group leader (tid %d)", w.tid)
				}
				if c.onLeader && w.tid == w.outer {
					t.Fatalf("ran on the thread it was to leave (tid %d)", w.tid)
				}
			}
		})
	}
}
