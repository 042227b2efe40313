package httpattach

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/maestro-run/maestro/internal/runtime"
)

// NewRuntime makes the runtime of a new session (not yet started) and
// returns it with its session id; it should set runtime.Config.BufferFrames
// to req.ReplayRing. Whatever else the session holds open (its log, its
// workspace) should be released by the runtime's Close
// (runtime.Config.Release): the map closes runtimes, nothing else.
type NewRuntime func(ctx context.Context, req CreateRequest) (*runtime.Runtime, string, error)

// DefaultCloseTimeout bounds how long SessionMap.Close waits for the
// sessions' work to stop and their logs to be saved.
const DefaultCloseTimeout = 10 * time.Second

// SessionMap is the registry of live sessions, kept in memory: Create
// makes a runtime with New and starts it; Add registers one made
// elsewhere (a hosted runner's bound or restored session). It implements
// SessionRemover, so a runtime shut down over HTTP (a shutdown message,
// or idle past Config.SessionIdle; the handler closes it) is forgotten.
// Close shuts every session down and refuses new ones.
type SessionMap struct {
	newRuntime NewRuntime

	mu     sync.Mutex
	m      map[string]*runtime.Runtime
	closed bool
}

// NewSessionMap returns an empty map whose Create uses newRuntime (nil:
// Create refuses with 404, only Add-ed sessions exist).
func NewSessionMap(newRuntime NewRuntime) *SessionMap {
	return &SessionMap{newRuntime: newRuntime, m: map[string]*runtime.Runtime{}}
}

// errClosing refuses a session created while the map shuts down.
var errClosing = &Error{Status: http.StatusServiceUnavailable, Code: CodeRuntimeNotReady, Message: "the server is shutting down"}

// Create implements Sessions.
func (m *SessionMap) Create(ctx context.Context, req CreateRequest) (*runtime.Runtime, string, error) {
	if m.newRuntime == nil {
		return nil, "", notFound(CodeNotFound, msgCreateSessionNotFound)
	}
	m.mu.Lock()
	closed := m.closed
	m.mu.Unlock()
	if closed {
		return nil, "", errClosing
	}
	rt, id, err := m.newRuntime(ctx, req)
	if err != nil {
		return nil, "", err
	}
	if id == "" {
		rt.Close()
		return nil, "", errors.New("new headless runtime has no session id")
	}
	m.mu.Lock()
	_, dup := m.m[id]
	if dup || m.closed {
		m.mu.Unlock()
		rt.Close()
		if dup {
			return nil, "", fmt.Errorf("headless session %s already exists", id)
		}
		return nil, "", errClosing
	}
	m.m[id] = rt
	m.mu.Unlock()
	rt.Start()
	return rt, id, nil
}

// Get implements Sessions.
func (m *SessionMap) Get(id string) (*runtime.Runtime, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rt, ok := m.m[id]
	return rt, ok
}

// Add registers a started runtime under id, replacing any other.
func (m *SessionMap) Add(id string, rt *runtime.Runtime) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.m[id] = rt
}

// Remove implements SessionRemover; it does not close the runtime.
func (m *SessionMap) Remove(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.m, id)
}

// IDs returns the session ids.
func (m *SessionMap) IDs() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	ids := make([]string, 0, len(m.m))
	for id := range m.m {
		ids = append(ids, id)
	}
	return ids
}

// Close closes every runtime (runs aborted, pending requests cancelled,
// utilities stopped, logs saved), forgets them and refuses new sessions.
// It waits at most DefaultCloseTimeout for sessions whose work does not
// stop, and reports them.
func (m *SessionMap) Close() error {
	m.mu.Lock()
	m.closed = true
	all := m.m
	m.m = map[string]*runtime.Runtime{}
	m.mu.Unlock()
	errs := make(chan error, len(all))
	for _, rt := range all {
		go func() { errs <- rt.Close() }()
	}
	timer := time.NewTimer(DefaultCloseTimeout)
	defer timer.Stop()
	var joined []error
	for range all {
		select {
		case err := <-errs:
			joined = append(joined, err)
		case <-timer.C:
			return errors.Join(append(joined, fmt.Errorf("headless sessions did not stop within %s", DefaultCloseTimeout))...)
		}
	}
	return errors.Join(joined...)
}
