// Command wall times whole commands: it runs each command N times and
// prints the median and p90 wall time, so whole-system figures (process
// start-up, `maestro version`) can be compared with a baseline measured in
// the same run.
//
//	go run ./bench/wall -n 20 -- /bin/true -- ./bin/maestro version
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"
)

func main() {
	n := flag.Int("n", 20, "runs per command")
	timeout := flag.Duration("timeout", 30*time.Second, "timeout per run")
	flag.Parse()
	cmds := split(flag.Args())
	if len(cmds) == 0 {
		fmt.Fprintln(os.Stderr, "usage: wall [-n N] -- cmd args... [-- cmd args...]")
		os.Exit(2)
	}
	fmt.Println("| command | runs | median | p90 |")
	fmt.Println("|---|---|---|---|")
	for _, c := range cmds {
		var times []time.Duration
		for range *n {
			ctx, cancel := context.WithTimeout(context.Background(), *timeout)
			cmd := exec.CommandContext(ctx, c[0], c[1:]...)
			start := time.Now()
			err := cmd.Run()
			d := time.Since(start)
			cancel()
			if err != nil {
				fmt.Fprintf(os.Stderr, "wall: %s: %v\n", strings.Join(c, " "), err)
				os.Exit(1)
			}
			times = append(times, d)
		}
		slices.Sort(times)
		fmt.Printf("| `%s` | %d | %s | %s |\n", strings.Join(c, " "), len(times), ms(times[len(times)/2]), ms(times[len(times)*9/10]))
	}
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }

// split splits args at "--" into commands.
func split(args []string) [][]string {
	var out [][]string
	var cur []string
	for _, a := range args {
		if a == "--" {
			if len(cur) > 0 {
				out = append(out, cur)
			}
			cur = nil
			continue
		}
		cur = append(cur, a)
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}
