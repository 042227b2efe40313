package httpattach

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/maestro-run/maestro/internal/runtime"
)

// NewRuntime makes the runtime of a new session (not yet started) and
// returns it with its session id; it should set runtime.Config.BufferFrames
// to req.ReplayRing.
type NewRuntime func(ctx context.Context, req CreateRequest) (*runtime.Runtime, string, error)

// SessionMap is a Sessions kept in memory: Create makes a runtime with
// New and starts it; Add registers one made elsewhere (a hosted runner's
// bound or restored session). It implements SessionRemover, so a
// runtime shut down over HTTP is forgotten.
type SessionMap struct {
	newRuntime NewRuntime

	mu sync.Mutex
	m  map[string]*runtime.Runtime
}

// NewSessionMap returns an empty map whose Create uses newRuntime (nil:
// Create refuses with 404, only Add-ed sessions exist).
func NewSessionMap(newRuntime NewRuntime) *SessionMap {
	return &SessionMap{newRuntime: newRuntime, m: map[string]*runtime.Runtime{}}
}

// Create implements Sessions.
func (m *SessionMap) Create(ctx context.Context, req CreateRequest) (*runtime.Runtime, string, error) {
	if m.newRuntime == nil {
		return nil, "", notFound(CodeNotFound, msgCreateSessionNotFound)
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
	if _, dup := m.m[id]; dup {
		m.mu.Unlock()
		rt.Close()
		return nil, "", fmt.Errorf("headless session %s already exists", id)
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

// Close closes every runtime and forgets them.
func (m *SessionMap) Close() error {
	m.mu.Lock()
	all := m.m
	m.m = map[string]*runtime.Runtime{}
	m.mu.Unlock()
	var errs []error
	for _, rt := range all {
		errs = append(errs, rt.Close())
	}
	return errors.Join(errs...)
}
