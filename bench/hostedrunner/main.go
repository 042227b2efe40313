// Command hostedrunner measures the hosted runner (bench/run.sh section
// "hostedrunner"): the time a drain takes with 10,000 events in the
// session log (in-process, through the real runner, session log and
// manifest writer), beside the floor of writing and syncing a file of the
// same size; and the resident memory of an idle `maestro hosted-runner`
// process in fixture mode, before and after a controller attaches, prompts
// and keeps an SSE stream open.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/maestro-run/maestro/bench/internal/benchproc"
	"github.com/maestro-run/maestro/internal/hostedrunner"
	"github.com/maestro-run/maestro/internal/protocol"
)

func main() {
	bin := flag.String("bin", "./bin/maestro", "maestro binary for the RSS measurement")
	events := flag.Int("events", 10000, "events in the session log before the drain")
	runs := flag.Int("runs", 5, "drains measured (median reported)")
	flag.Parse()
	if err := drainBench(*events, *runs); err != nil {
		fmt.Fprintln(os.Stderr, "drain:", err)
		os.Exit(1)
	}
	if err := rssBench(*bin); err != nil {
		fmt.Fprintln(os.Stderr, "rss:", err)
		os.Exit(1)
	}
}

func median(d []time.Duration) time.Duration {
	slices.Sort(d)
	return d[len(d)/2]
}

func drainBench(events, runs int) error {
	var drains, floors []time.Duration
	var logBytes int64
	for i := 0; i < runs; i++ {
		ws, err := os.MkdirTemp("", "hr-bench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(ws)
		cfg := hostedrunner.Config{RunnerSessionID: "mrs_bench", WorkspaceRoot: ws, MaestroSessionID: "session_bench",
			SnapshotRoot: filepath.Join(ws, ".maestro", "runner-snapshots"), StateDir: filepath.Join(ws, "state"), Listen: "127.0.0.1:0"}
		r, err := hostedrunner.New(cfg, hostedrunner.Options{})
		if err != nil {
			return err
		}
		for n := 0; n < events; n++ {
			r.Runtime().Broadcast(protocol.Status{Message: "event " + strconv.Itoa(n) + ": the agent is working on the task"})
		}
		start := time.Now()
		d, code, err := r.Drain(context.Background(), hostedrunner.DrainRequest{Reason: "bench"})
		drains = append(drains, time.Since(start))
		if err != nil || code != http.StatusOK {
			return fmt.Errorf("drain: %v %d", err, code)
		}
		st, err := os.Stat(d.Manifest.Runtime.SessionFile)
		if err != nil {
			return err
		}
		logBytes = st.Size()
		r.Close()
		// Floor: write and fsync a file as large as the log.
		data := bytes.Repeat([]byte("x"), int(logBytes))
		start = time.Now()
		f, err := os.Create(filepath.Join(ws, "floor"))
		if err != nil {
			return err
		}
		f.Write(data)
		f.Sync()
		f.Close()
		floors = append(floors, time.Since(start))
	}
	fmt.Printf("Drain with %d events in the session log (%.1f MB), median of %d:\n\n", events, float64(logBytes)/1e6, runs)
	fmt.Println("| what | median |")
	fmt.Println("|---|---|")
	fmt.Printf("| floor: write + fsync a file of the log's size | %.1f ms |\n", float64(median(floors).Microseconds())/1000)
	fmt.Printf("| drain: stop, flush log, snapshot, export check, manifest | %.1f ms |\n", float64(median(drains).Microseconds())/1000)
	fmt.Println()
	return nil
}

func rss(pid int) (int, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			return strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
		}
	}
	return 0, fmt.Errorf("no VmRSS")
}

func rssBench(bin string) error {
	ws, err := os.MkdirTemp("", "hr-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(ws)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "hosted-runner")
	cmd.Env = append(os.Environ(), "MAESTRO_HOME="+filepath.Join(ws, "home"), "MAESTRO_RUNNER_SESSION_ID=mrs_bench",
		"MAESTRO_SESSION_ID=session_bench", "MAESTRO_WORKSPACE_ROOT="+ws, "MAESTRO_HOSTED_RUNNER_LISTEN=127.0.0.1:0",
		"MAESTRO_HOSTED_RUNNER_FIXTURE=1")
	stdin, out, err := benchproc.StartPiped(cmd)
	if err != nil {
		return err
	}
	defer func() { stdin.Close(); cmd.Wait() }()
	sc := bufio.NewScanner(out)
	if !sc.Scan() {
		return fmt.Errorf("no ready line")
	}
	var ready struct{ BaseURL, SessionID string }
	if err := json.Unmarshal(sc.Bytes(), &ready); err != nil {
		return err
	}
	go io.Copy(io.Discard, out)
	time.Sleep(time.Second) // settle: this measures idle memory
	idle, err := rss(cmd.Process.Pid)
	if err != nil {
		return err
	}

	post := func(path string, body any, hdr map[string]string) (map[string]any, error) {
		data, _ := json.Marshal(body)
		req, _ := http.NewRequestWithContext(ctx, "POST", ready.BaseURL+path, bytes.NewReader(data))
		req.Header.Set("Content-Type", "application/json")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		var m map[string]any
		json.NewDecoder(resp.Body).Decode(&m)
		if resp.StatusCode != 200 {
			return nil, fmt.Errorf("%s: %d %v", path, resp.StatusCode, m)
		}
		return m, nil
	}
	reg, err := post("/api/headless/connections", map[string]any{"role": "controller", "protocolVersion": protocol.Version}, nil)
	if err != nil {
		return err
	}
	conn := reg["connection_id"].(string)
	sub, err := post("/api/headless/sessions/"+ready.SessionID+"/subscribe", map[string]any{"connectionId": conn, "role": "controller"}, nil)
	if err != nil {
		return err
	}
	subID := sub["subscription_id"].(string)
	req, _ := http.NewRequestWithContext(ctx, "GET", ready.BaseURL+"/api/headless/sessions/"+ready.SessionID+"/events?subscriptionId="+subID, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	hdr := map[string]string{"x-maestro-headless-connection-id": conn, "x-maestro-headless-subscriber-id": subID}
	if _, err := post("/api/headless/sessions/"+ready.SessionID+"/messages", map[string]any{"type": "prompt", "content": "hello"}, hdr); err != nil {
		return err
	}
	esc := bufio.NewScanner(resp.Body)
	for esc.Scan() {
		if strings.Contains(esc.Text(), "Prompt: hello") {
			break
		}
	}
	time.Sleep(time.Second)
	attached, err := rss(cmd.Process.Pid)
	if err != nil {
		return err
	}
	fmt.Println("Idle RSS of `maestro hosted-runner` (fixture agent):")
	fmt.Println()
	fmt.Println("| state | RSS |")
	fmt.Println("|---|---|")
	fmt.Printf("| idle after the ready line | %.1f MB |\n", float64(idle)/1024)
	fmt.Printf("| idle with one controller attached (one prompt, SSE stream open) | %.1f MB |\n", float64(attached)/1024)
	return nil
}
