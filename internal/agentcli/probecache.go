package agentcli

import (
	"context"
	"os"
	"strings"
	"sync"
	"time"
)

// ProbeCache remembers the versions its Detect found, for a process that
// lists the CLIs again and again (serve's GET /api/v1/agents, which ran
// every CLI's version probe on each request: about 3 s of waiting and of
// CPU for the five built-in CLIs, each a Node or Bun program). An answer
// is reused while the binary is the same file, unchanged (path, size,
// modification time, inode), and the definition asks the same way
// (version_args, version_pattern); a failed or timed-out probe is kept
// for ProbeFailureTTL only (a probe can time out on a busy machine), so a
// page polling the list does not wait ProbeTimeout at every request. The
// zero value is ready.
type ProbeCache struct {
	mu      sync.Mutex
	entries map[probeKey]probeResult
	now     func() time.Time // nil: time.Now
}

// ProbeFailureTTL is how long a ProbeCache keeps a failed probe.
const ProbeFailureTTL = time.Minute

// probeResult is a probe's answer and when it came.
type probeResult struct {
	version string
	err     error
	at      time.Time
}

// probeKey is what a cached version depends on.
type probeKey struct {
	path, args, pattern string
	size                int64
	mtime               time.Time
	ino                 uint64
}

// DescribeAll is the package's DescribeAll with the version probes of
// unchanged binaries answered from the cache.
func (c *ProbeCache) DescribeAll(ctx context.Context, defs []*Definition, path string) ([]Info, []Detection) {
	dets := c.DetectAll(ctx, defs, path)
	out := make([]Info, len(defs))
	for i, def := range defs {
		out[i] = describe(def, dets[i])
	}
	return out, dets
}

// DetectAll is the package's DetectAll through the cache.
func (c *ProbeCache) DetectAll(ctx context.Context, defs []*Definition, path string) []Detection {
	out := make([]Detection, len(defs))
	var wg sync.WaitGroup
	for i, def := range defs {
		wg.Go(func() { out[i] = c.Detect(ctx, def, path) })
	}
	wg.Wait()
	return out
}

// Detect is the package's Detect, the version answered from the cache
// when the binary and the way to ask are those of a probe that succeeded.
func (c *ProbeCache) Detect(ctx context.Context, def *Definition, path string) Detection {
	bin, err := lookPath(def.Binary, path)
	if err != nil {
		return Detection{ID: def.ID, Err: err}
	}
	key, ok := newProbeKey(bin, def)
	if ok {
		c.mu.Lock()
		r, hit := c.entries[key]
		c.mu.Unlock()
		if hit && (r.err == nil || c.clock().Sub(r.at) < ProbeFailureTTL) {
			return Detection{ID: def.ID, Path: bin, Version: r.version, Err: r.err}
		}
	}
	det := Detect(ctx, def, path)
	if ok && det.Path == bin && ctx.Err() == nil {
		c.mu.Lock()
		if c.entries == nil {
			c.entries = map[probeKey]probeResult{}
		}
		c.entries[key] = probeResult{version: det.Version, err: det.Err, at: c.clock()}
		c.mu.Unlock()
	}
	return det
}

func (c *ProbeCache) clock() time.Time {
	if c.now != nil {
		return c.now()
	}
	return time.Now()
}

// newProbeKey is the cache key of def's probe of bin; false when bin
// cannot be examined (then nothing is cached).
func newProbeKey(bin string, def *Definition) (probeKey, bool) {
	st, err := os.Stat(bin)
	if err != nil {
		return probeKey{}, false
	}
	k := probeKey{path: bin, args: strings.Join(def.VersionArgs, "\x00"), pattern: def.VersionPattern,
		size: st.Size(), mtime: st.ModTime(), ino: inode(st)}
	return k, true
}
