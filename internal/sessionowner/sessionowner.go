// Package sessionowner spreads the live sessions of the HTTP attach API
// over several `maestro serve` processes sharing one store
// (docs/scale-out.md, "Live sessions"). A session lives in the process
// that created it; that process records itself as the owner (its instance
// id and advertised address) in the store and heartbeats its sessions.
// Any other serve that receives a request for the session proxies it to
// the owner, event streams included, or answers 409 with the owner's
// address when proxying is off. A session whose owner stopped
// heartbeating is marked ended with a reason, and requests for it say so.
package sessionowner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"time"

	"github.com/maestro-run/maestro/internal/runtime"
	"github.com/maestro-run/maestro/internal/store"
	"github.com/maestro-run/maestro/internal/transport/httpattach"
)

// DefaultStaleAfter is how long an owner may go without a heartbeat
// before its sessions count as ended; owners heartbeat three times as
// often.
const DefaultStaleAfter = 30 * time.Second

// storeTimeout bounds one store call made for a request or a heartbeat.
const storeTimeout = 10 * time.Second

// ProxiedHeader marks a request one serve proxied to another, naming the
// proxying instance; a proxied request is never proxied again (two
// processes that disagree about an owner answer 409 instead of looping).
const ProxiedHeader = "X-Maestro-Proxied-By"

// End reasons recorded in the store.
const (
	ReasonShutDown     = "the session was shut down"
	ReasonServeStopped = "its serve process stopped"
	ReasonRestarted    = "its serve process stopped (a new one took its name)"
	ReasonDied         = "its serve process died (killed or crashed; the next serve on this store ended it)"
)

// Config configures a Cluster. Store, Local, Instance and Address are
// required.
type Config struct {
	Store store.LiveSessions
	// Local is this process's registry of live sessions.
	Local *httpattach.SessionMap
	// Instance identifies this process among the serve processes sharing
	// the store (unique: host:pid by default).
	Instance string
	// Address is this process's base URL as the other serve processes
	// reach it ("http://10.0.0.5:7878").
	Address string
	// Proxy, when true, forwards requests for sessions owned elsewhere to
	// their owner; otherwise they are answered 409 with its address.
	Proxy bool
	// StaleAfter is how long an owner may miss heartbeats before its
	// sessions are ended (default DefaultStaleAfter).
	StaleAfter time.Duration
	// Exclusive: the store is this process's alone (SQLite, which one
	// process holds at a time), so an open record of another instance
	// found at start is a serve that died without ending it: EndPrevious
	// ends it at once rather than after StaleAfter.
	Exclusive bool
	// Transport carries proxied requests (default: a clone of
	// http.DefaultTransport).
	Transport http.RoundTripper
	// Now is the clock (default time.Now).
	Now    func() time.Time
	Logger *slog.Logger
}

// Cluster is this process's view of the live sessions of every serve
// sharing the store. It implements httpattach.Sessions and
// httpattach.SessionRemover over Config.Local, recording ownership as
// sessions are created and shut down.
type Cluster struct {
	*httpattach.SessionMap
	cfg   Config
	log   *slog.Logger
	proxy *httputil.ReverseProxy

	closeOnce sync.Once
}

// New returns a Cluster for cfg.
func New(cfg Config) (*Cluster, error) {
	if cfg.Store == nil || cfg.Local == nil || cfg.Instance == "" {
		return nil, errors.New("session owners: a store, a local registry and an instance id are required")
	}
	u, err := url.Parse(cfg.Address)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("advertised address: expected an http:// or https:// URL, found %q", cfg.Address)
	}
	if cfg.StaleAfter <= 0 {
		cfg.StaleAfter = DefaultStaleAfter
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Transport == nil {
		cfg.Transport = http.DefaultTransport.(*http.Transport).Clone()
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Cluster{SessionMap: cfg.Local, cfg: cfg, log: log}
	c.proxy = c.newProxy()
	return c, nil
}

// Create implements httpattach.Sessions: the session is created here and
// recorded as this process's.
func (c *Cluster) Create(ctx context.Context, req httpattach.CreateRequest) (*runtime.Runtime, string, error) {
	// What to remove of the session should it be refused once made,
	// given by the code that makes it (the httpattach.NewRuntime).
	var undo []func()
	req.OnRefused = func(u func()) { undo = append(undo, u) }
	rt, id, err := c.SessionMap.Create(ctx, req)
	if err != nil {
		return nil, "", err
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	defer cancel()
	if _, err := c.cfg.Store.OwnLiveSession(sctx, id, c.cfg.Instance, c.cfg.Address); err != nil {
		// A session the other serve processes cannot find is refused
		// rather than half-shared, and leaves nothing behind: the client
		// never learned of it.
		c.SessionMap.Remove(id)
		rt.Close()
		for _, u := range undo {
			u()
		}
		return nil, "", c.storeUnavailable("record the new session's owner", err, "session", id)
	}
	return rt, id, nil
}

// Remove implements httpattach.SessionRemover: a session shut down over
// HTTP is forgotten and recorded as ended.
func (c *Cluster) Remove(id string) {
	c.SessionMap.Remove(id)
	c.end(id, ReasonShutDown)
}

func (c *Cluster) end(id, reason string) {
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	if _, err := c.cfg.Store.EndLiveSession(ctx, id, c.cfg.Instance, reason); err != nil && !errors.Is(err, store.ErrNotFound) {
		c.log.Warn("record the end of a live session", "session", id, "err", err)
	}
}

// Close records every session of this process as ended (the serve
// process stops) and closes them.
func (c *Cluster) Close() error {
	var err error
	c.closeOnce.Do(func() {
		for _, id := range c.SessionMap.IDs() {
			c.end(id, ReasonServeStopped)
		}
		err = c.SessionMap.Close()
	})
	return err
}

// EndPrevious ends the open records of an earlier process that had this
// instance id (a serve restarted under the same --name): this process's
// heartbeat would keep them alive otherwise. Call it before serving.
// With Config.Exclusive it ends every other instance's open records too
// (ReasonDied): on a store one process holds, their owner is gone.
//
// Records at another address whose heartbeat is fresh are another serve
// running under the same name, not an earlier one: EndPrevious refuses
// to start rather than end the sessions that serve still runs.
// (On PostgreSQL, serve's start-up has refused a running process's
// --name before this, from its process record: store.Processes. This
// check still holds for the sessions themselves.)
func (c *Cluster) EndPrevious(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	if c.cfg.Exclusive {
		if err := c.endDead(ctx); err != nil {
			return err
		}
	}
	open, err := c.cfg.Store.ListLiveSessions(ctx, store.LiveSessionFilter{Open: true, Instance: c.cfg.Instance})
	if err != nil {
		return fmt.Errorf("end the live sessions of an earlier %s: %w", c.cfg.Instance, err)
	}
	now := c.cfg.Now()
	for _, s := range open {
		if age := now.Sub(s.HeartbeatAt); !c.cfg.Exclusive && s.Address != c.cfg.Address && age < c.cfg.StaleAfter {
			return fmt.Errorf("--name %s is taken: the serve at %s runs live sessions under it (heartbeat %s ago); give each serve process its own --name (if that process has stopped, its sessions end within %s)",
				c.cfg.Instance, s.Address, age.Round(time.Second), (c.cfg.StaleAfter - age).Round(time.Second))
		}
	}
	for _, s := range open {
		if _, local := c.Get(s.ID); local {
			continue
		}
		if _, err := c.cfg.Store.EndLiveSession(ctx, s.ID, c.cfg.Instance, ReasonRestarted); err != nil && !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("end live session %s of an earlier %s: %w", s.ID, c.cfg.Instance, err)
		}
	}
	return nil
}

// endDead ends the open records of the other instances: on an exclusive
// store, the serve processes that left them died.
func (c *Cluster) endDead(ctx context.Context) error {
	open, err := c.cfg.Store.ListLiveSessions(ctx, store.LiveSessionFilter{Open: true})
	if err != nil {
		return fmt.Errorf("end the live sessions of a serve that died: %w", err)
	}
	for _, s := range open {
		if s.Instance == c.cfg.Instance {
			continue // EndPrevious's
		}
		if _, err := c.cfg.Store.EndLiveSession(ctx, s.ID, s.Instance, ReasonDied); err != nil && !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("end live session %s of %s, a serve that died: %w", s.ID, s.Instance, err)
		}
		c.log.Info("live session ended: its serve process died", "session", s.ID, "owner", s.Instance)
	}
	return nil
}

// Run heartbeats this process's sessions and ends those of owners that
// stopped heartbeating, until ctx ends.
func (c *Cluster) Run(ctx context.Context) {
	t := time.NewTicker(c.cfg.StaleAfter / 3)
	defer t.Stop()
	for {
		c.Beat(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Beat heartbeats this process's sessions and sweeps stale owners once.
func (c *Cluster) Beat(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	if _, err := c.cfg.Store.HeartbeatLiveSessions(ctx, c.cfg.Instance); err != nil && ctx.Err() == nil {
		c.log.Warn("heartbeat live sessions", "err", err)
	}
	if _, err := c.sweep(ctx); err != nil && ctx.Err() == nil {
		c.log.Warn("end the live sessions of dead serve processes", "err", err)
	}
}

// sweep ends the sessions whose owner's heartbeat is stale.
func (c *Cluster) sweep(ctx context.Context) ([]store.LiveSession, error) {
	now := c.cfg.Now()
	ended, err := c.cfg.Store.EndStaleLiveSessions(ctx, now.Add(-c.cfg.StaleAfter),
		fmt.Sprintf("its owner stopped heartbeating (no heartbeat for %s)", c.cfg.StaleAfter))
	for _, s := range ended {
		c.log.Info("live session ended: its owner stopped heartbeating", "session", s.ID, "owner", s.Instance, "address", s.Address)
	}
	return ended, err
}

// stale reports whether s's owner missed its heartbeats.
func (c *Cluster) stale(s store.LiveSession) bool {
	return !s.Ended() && s.HeartbeatAt.Before(c.cfg.Now().Add(-c.cfg.StaleAfter))
}

// Instance is this process's instance id.
func (c *Cluster) Instance() string { return c.cfg.Instance }

// Address is this process's advertised address.
func (c *Cluster) Address() string { return c.cfg.Address }
