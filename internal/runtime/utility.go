package runtime

import (
	"context"
	"fmt"
	"time"

	"github.com/maestro-run/maestro/internal/protocol"
)

// utility handles the utility operations (wire contract §10) after the
// capability check of §8.2: an operation needs its capability negotiated
// in hello, except utility_command_terminate and utility_file_watch_stop.
// Starting, stopping, writing and resizing are answered synchronously;
// file search and file read run in the background (their results and
// failures are published; a file read failure carries request_id =
// read_id).
func (r *Runtime) utility(ctx context.Context, c *Conn, m protocol.Message) error {
	need := func(op protocol.UtilityOperation) error {
		r.mu.Lock()
		ok := c.hasOp(op)
		r.mu.Unlock()
		if !ok {
			return forbidden(fmt.Sprintf("%s requires %s capability", m.MessageType(), op))
		}
		if r.util == nil {
			return forbidden(msgNoUtilities)
		}
		return r.confine(c, m)
	}
	none := func() error {
		if r.util == nil {
			return forbidden(msgNoUtilities)
		}
		return nil
	}
	u := r.util
	switch m := m.(type) {
	case protocol.UtilityCommandStart:
		if err := need(protocol.OpCommandExec); err != nil {
			return err
		}
		return u.CommandStart(r.ctx, c.id, m)
	case protocol.UtilityCommandTerminate:
		if err := none(); err != nil {
			return err
		}
		return u.CommandTerminate(c.id, m)
	case protocol.UtilityCommandStdin:
		if err := need(protocol.OpCommandExec); err != nil {
			return err
		}
		return u.CommandStdin(c.id, m)
	case protocol.UtilityCommandResize:
		if err := need(protocol.OpCommandExec); err != nil {
			return err
		}
		return u.CommandResize(c.id, m)
	case protocol.UtilityFileSearch:
		if err := need(protocol.OpFileSearch); err != nil {
			return err
		}
		r.async(func(ctx context.Context) {
			res, err := u.FileSearch(ctx, m)
			if err != nil {
				r.publish(ErrorMessage(err), "")
				return
			}
			res.SearchID = m.SearchID
			r.publish(res, "")
		})
	case protocol.UtilityFileRead:
		if err := need(protocol.OpFileRead); err != nil {
			return err
		}
		r.async(func(ctx context.Context) {
			res, err := u.FileRead(ctx, m)
			if err != nil {
				e := ErrorMessage(err)
				e.RequestID = m.ReadID
				r.publish(e, "")
				return
			}
			res.ReadID = m.ReadID
			r.publish(res, "")
		})
	case protocol.UtilityFileWatchStart:
		if err := need(protocol.OpFileWatch); err != nil {
			return err
		}
		return u.WatchStart(r.ctx, c.id, m)
	case protocol.UtilityFileWatchStop:
		if err := none(); err != nil {
			return err
		}
		return u.WatchStop(c.id, m)
	default:
		return forbidden(fmt.Sprintf("Unsupported headless command type: %s", m.MessageType()))
	}
	return nil
}

// pathConfiner is Utilities that can tell, without running a request,
// whether a path it names lies outside the workspace (internal/utility's
// Manager).
type pathConfiner interface {
	OutsideWorkspace(m protocol.Message) bool
}

// confine refuses a utility request from a connection over HTTP that names
// a path outside the workspace (the path of utility_file_read, the cwd of
// utility_file_search and utility_command_start, the root_dir of
// utility_file_watch_start; a path that does not exist yet is resolved
// through its longest existing prefix): the request itself is answered
// 403 "Path is outside hosted workspace root" (wire contract §10, hosted
// rule), not an error on the stream later. Over stdio the operation
// reports it as the reference server does.
func (r *Runtime) confine(c *Conn, m protocol.Message) error {
	pc, ok := r.util.(pathConfiner)
	if c.local || !ok || !pc.OutsideWorkspace(m) {
		return nil
	}
	return forbidden(msgOutsideHostedRoot)
}

// asyncGrace bounds how long a shutdown waits for an asynchronous
// operation after cancelling it. Operations end on cancellation, but one
// stuck in a system call that cancellation cannot reach (a blocking read)
// must not hold the runtime's shutdown for good: after the grace it is
// abandoned, and what it publishes later is dropped with the closed log.
const asyncGrace = time.Second

// async runs fn in the background as work in flight (WaitIdle and
// Shutdown wait for it); its context ends when the runtime closes. Once
// that context has ended, fn counts as in flight for at most asyncGrace.
func (r *Runtime) async(fn func(ctx context.Context)) {
	r.mu.Lock()
	r.beginLocked()
	r.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(r.ctx)
	}()
	go func() {
		defer r.end()
		select {
		case <-done:
			return
		case <-r.ctx.Done():
		}
		grace := time.NewTimer(asyncGrace)
		defer grace.Stop()
		select {
		case <-done:
		case <-grace.C:
			r.cfg.Logger.Warn("utility operation still running after cancellation; shutdown no longer waits for it", "grace", asyncGrace)
		}
	}()
}
