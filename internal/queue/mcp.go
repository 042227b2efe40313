package queue

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/maestro-run/maestro/internal/engine"
	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/mcp"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/workspace"
)

// JobMCP gives queued jobs the tools of MCP servers (docs/mcp.md, "In
// queued jobs"): each job run has its own servers, started when a
// movement first needs them and stopped when the run ends.
type JobMCP struct {
	// Lookup resolves a server's slug: the servers a task names in its
	// payload's mcp_servers, and Default. The configuration file's
	// servers are mcp.ConfigLookup; serve may chain its own in front.
	Lookup mcp.Lookup
	// Default are the servers of a job whose payload names none (every
	// server of config.yaml's mcp_servers).
	Default []string
	// Getenv expands ${VAR} in the servers' env and headers (nil:
	// os.Getenv).
	Getenv func(string) string
	Logger *slog.Logger
	// ElicitTimeout bounds the wait for the answer to a server's
	// question (0: DefaultElicitTimeout; park.go).
	ElicitTimeout time.Duration
}

// startMCP returns the MCP client of one job run over the servers the
// payload names (else JobMCP.Default), nil when there are none: stdio
// servers run in the job's workspace, their stderr lines and failures go
// to the job's log as status lines, elicitations park the job
// (park.go), sampling is served by the job's model where allowed. A
// server the payload names that no one declared fails the job, naming
// it.
func (r *engineRunner) startMCP(ctx context.Context, j *Job, jr *jobRun, prov llm.Provider, pl Payload, root *workspace.Root, em *emitter) (*mcp.Manager, error) {
	jm := r.cfg.MCP
	slugs := pl.MCPServers
	if slugs == nil && jm != nil {
		slugs = jm.Default
	}
	if len(slugs) == 0 {
		return nil, nil
	}
	var lookup mcp.Lookup
	if jm != nil {
		lookup = jm.Lookup
	}
	servers, err := mcp.Resolve(ctx, lookup, slugs)
	if err != nil {
		return nil, fmt.Errorf("job payload field \"mcp_servers\": %w", err)
	}
	o := mcp.Options{Servers: servers, Dir: root.Dir(),
		Report: func(msg string) { em.Event(protocol.Status{Message: msg}) },
		Stderr: func(server string) io.Writer { return &statusLines{em: em, prefix: "MCP server " + server + ": "} },
		Elicit: r.elicitFor(j.ID, jr),
		Model:  prov, // sampling, for the servers that allow it
	}
	if jm != nil {
		o.Getenv, o.Logger = jm.Getenv, jm.Logger
	}
	return mcp.NewManager(o), nil
}

// engineMCP is m as the engine's MCP servers (a nil interface for none).
func engineMCP(m *mcp.Manager) engine.MCPServers {
	if m == nil {
		return nil
	}
	return m
}

// maxStatusLine bounds one stderr line shown in a job's log.
const maxStatusLine = 2000

// statusLines writes a server's stderr to the job's log, one status line
// per line of text (a line longer than maxStatusLine is cut).
type statusLines struct {
	em     *emitter
	prefix string
	mu     sync.Mutex
	buf    []byte
}

func (w *statusLines) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			if len(w.buf) > maxStatusLine {
				w.emit(w.buf)
				w.buf = w.buf[:0]
			}
			return len(p), nil
		}
		w.emit(w.buf[:i])
		w.buf = w.buf[i+1:]
	}
}

func (w *statusLines) emit(line []byte) {
	line = bytes.TrimRight(line, "\r")
	if len(line) == 0 {
		return
	}
	if len(line) > maxStatusLine {
		line = append(line[:maxStatusLine:maxStatusLine], "…"...)
	}
	w.em.Event(protocol.Status{Message: w.prefix + string(bytes.ToValidUTF8(line, []byte("?")))})
}
