package server

import (
	"context"
	"sync"
	"time"

	"github.com/maestro-run/maestro/internal/store"
)

// feedWindow is how many of a job's most recent events a feed keeps for its
// streams; a stream further behind reads the store itself.
const feedWindow = 4096

// feeds shares one reader of each followed job's event log among all the
// streams following it in this process: on a wake-up the feed reads the
// new events once and every stream takes them from memory, instead of
// every stream querying the store (1,000 subscribers on one job would be
// 1,000 queries per event).
type feeds struct {
	st        store.Store
	poll      time.Duration
	mu        sync.Mutex
	m         map[int64]*feed
	onStopped func() // tests
}

// feed is the shared reader of one job's log.
type feed struct {
	id     int64
	refs   int // guarded by feeds.mu
	cancel context.CancelFunc

	mu      sync.Mutex
	events  []store.JobEvent // the most recent events read, in order
	last    int64            // the highest sequence number read
	changed chan struct{}    // closed (and replaced) when events arrive
	closed  bool             // the feed stopped (store closed)
}

func newFeeds(st store.Store, poll time.Duration) *feeds {
	return &feeds{st: st, poll: poll, m: map[int64]*feed{}}
}

// join returns the feed of job id, starting it if needed; call the
// returned function when the stream ends. The feed is subscribed to the
// job's wake-ups before join returns, so an event appended after join is
// delivered by the feed.
func (fs *feeds) join(ctx context.Context, id int64) (*feed, func(), error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	f, ok := fs.m[id]
	if !ok {
		fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		sub, err := fs.st.Subscribe(fctx, store.JobTopic(id))
		if err != nil {
			cancel()
			return nil, nil, err
		}
		j, err := fs.st.GetJob(ctx, id)
		if err != nil {
			sub.Close()
			cancel()
			return nil, nil, err
		}
		f = &feed{id: id, cancel: cancel, last: j.LastSeq, changed: make(chan struct{})}
		fs.m[id] = f
		go fs.run(fctx, f, sub)
	}
	f.refs++
	leave := func() {
		fs.mu.Lock()
		defer fs.mu.Unlock()
		f.refs--
		if f.refs == 0 {
			f.cancel()
			if fs.m[id] == f {
				delete(fs.m, id)
			}
		}
	}
	return f, leave, nil
}

// run reads the job's new events on every wake-up (and every poll
// interval, as a backstop for lost wake-ups) until ctx ends.
func (fs *feeds) run(ctx context.Context, f *feed, sub *store.Subscription) {
	defer sub.Close()
	defer func() {
		f.mu.Lock()
		f.closed = true
		close(f.changed)
		f.mu.Unlock()
		if fs.onStopped != nil {
			fs.onStopped()
		}
	}()
	tick := time.NewTicker(fs.poll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-sub.C():
			if !ok {
				return
			}
		case <-tick.C:
		}
		for {
			f.mu.Lock()
			after := f.last
			f.mu.Unlock()
			events, err := fs.st.ReadJobEvents(ctx, f.id, after, store.MaxListLimit)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				break // try again on the next wake-up or tick
			}
			if len(events) > 0 {
				f.mu.Lock()
				f.events = append(f.events, events...)
				if n := len(f.events); n > feedWindow {
					f.events = append([]store.JobEvent(nil), f.events[n-feedWindow:]...)
				}
				f.last = events[len(events)-1].Seq
				close(f.changed)
				f.changed = make(chan struct{})
				f.mu.Unlock()
			}
			if len(events) < store.MaxListLimit {
				break
			}
		}
	}
}

// since returns the feed's events after seq `after` and a channel closed
// when more arrive. ok is false when the feed does not hold every event
// after `after` (the stream must read the store), and closed is true when
// the feed has stopped.
func (f *feed) since(after int64) (events []store.JobEvent, wait <-chan struct{}, ok, closed bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil, nil, false, true
	}
	if after >= f.last {
		return nil, f.changed, true, false
	}
	if len(f.events) == 0 || f.events[0].Seq > after+1 {
		return nil, f.changed, false, false
	}
	i := int(after + 1 - f.events[0].Seq)
	return f.events[i:], f.changed, true, false
}
