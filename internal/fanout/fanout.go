// Package fanout is Maestro's one cursor fan-out: a bounded replay ring of
// the most recent frames of a log, each numbered by the cursor the log gave
// it, read by any number of readers from a cursor. The headless runtime
// (internal/runtime: a session's frames to stdio, HTTP attach and the
// hosted runner) and `maestro serve`'s job event streams (internal/server)
// both serve their subscribers from it; docs/remote-attach.md ("Fan-out")
// states the ring sizes and the lag, reset and resume rules for users.
//
// A Ring holds at most Limits.Frames frames and Limits.Bytes bytes. When
// it is full the oldest frame is evicted, unless a lossless reader has not
// read it yet: then the writer waits (Reserve), which is how a slow reader
// that must not lose anything applies backpressure. A lossy reader that
// falls behind the ring, or more than its MaxBacklog frames behind the
// newest, gets ErrLagged and decides what a reset means for its surface
// (a snapshot for a session stream, a read of the store for a job stream).
// A reader resumes from a cursor (Last-Event-ID) while the frames after it
// are still buffered; an older cursor is a gap (GapError).
//
// Cursors are increasing but need not be consecutive: a session log also
// numbers records that are not published. A Ring is not safe for
// concurrent use by itself: it is guarded by the sync.Locker given to New,
// which the owner also uses to keep its own state (a snapshot, a cursor)
// consistent with the frames, and every method must be called with that
// lock held. Readers wait for frames on the channel of Wait, or on Ready.
package fanout

import (
	"errors"
	"fmt"
	"io"
	"iter"
	"sort"
	"sync"
)

// ErrReaderClosed is returned by Next after CloseReader.
var ErrReaderClosed = errors.New("fanout: the reader is closed")

// ErrLagged is returned by Next to a lossy reader that fell behind the
// ring (its next frame was evicted) or beyond its MaxBacklog.
var ErrLagged = errors.New("fanout: the reader fell behind the replay ring")

// GapError is the error of a resume from a cursor whose next frames are no
// longer buffered.
type GapError struct {
	// Cursor is the cursor asked for.
	Cursor int64
	// Oldest is the oldest cursor a resume can start after.
	Oldest int64
}

func (e *GapError) Error() string {
	return fmt.Sprintf("cursor %d, oldest buffered after %d", e.Cursor, e.Oldest)
}

// Limits bound a Ring.
type Limits struct {
	// Frames is the most frames it holds (at least 1).
	Frames int
	// Bytes is the most bytes (the sizes given to Push) it holds; 0 or
	// less: no bound. A single frame larger than Bytes is still held,
	// alone.
	Bytes int
}

type slot[T any] struct {
	cursor int64
	size   int
	v      T
}

// Ring is a bounded replay buffer with its readers. Create it with New.
type Ring[T any] struct {
	// slots grows on demand up to maxFrames (doubling, the frames kept
	// in order), so that an idle session's ring costs a few slots, not
	// Limits.Frames (issue 22: memory per idle session).
	slots     []slot[T]
	maxFrames int
	head      int // index of the oldest frame
	n         int
	bytes     int
	maxBytes  int
	// first is the sequence number of the oldest frame; sequence numbers
	// count pushes and are what readers hold, cursors are the log's.
	first uint64
	// evicted is the cursor of the newest frame evicted so far, or the
	// start cursor given to New: a resume after an older cursor is a gap.
	evicted  int64
	lossless []*Reader
	notify   chan struct{} // closed when something changes; nil if nobody waits
	space    *sync.Cond    // signalled when a lossless reader frees the oldest frame
	closed   bool
}

// New returns an empty ring guarded by lock. start is the cursor of the
// log when the ring begins (0 for a new log): frames before it were never
// buffered, so resuming before it is a gap.
func New[T any](lock sync.Locker, l Limits, start int64) *Ring[T] {
	maxBytes := l.Bytes
	if maxBytes <= 0 {
		maxBytes = int(^uint(0) >> 1)
	}
	return &Ring[T]{maxFrames: max(l.Frames, 1), maxBytes: maxBytes, first: 1, evicted: start, space: sync.NewCond(lock)}
}

// Len is the number of buffered frames.
func (r *Ring[T]) Len() int { return r.n }

// Bytes is the total size of the buffered frames.
func (r *Ring[T]) Bytes() int { return r.bytes }

// Evicted is the cursor after which the buffered frames are complete: the
// newest evicted frame's, or the start cursor.
func (r *Ring[T]) Evicted() int64 { return r.evicted }

// Closed reports whether Close was called.
func (r *Ring[T]) Closed() bool { return r.closed }

func (r *Ring[T]) end() uint64 { return r.first + uint64(r.n) }

func (r *Ring[T]) at(seq uint64) *slot[T] {
	return &r.slots[(r.head+int(seq-r.first))%len(r.slots)]
}

func (r *Ring[T]) full(size int) bool {
	return r.n >= r.maxFrames || (r.n > 0 && r.bytes+size > r.maxBytes)
}

// minSlots is the first allocation of a ring's slots.
const minSlots = 8

// grow makes room for one more frame when the slots are all used (the
// ring is below its frame limit): twice the slots, at most the limit, the
// frames moved to the front in order.
func (r *Ring[T]) grow() {
	if r.n < len(r.slots) {
		return
	}
	slots := make([]slot[T], min(max(2*len(r.slots), minSlots), r.maxFrames))
	for i := range r.n {
		slots[i] = r.slots[(r.head+i)%len(r.slots)]
	}
	r.slots, r.head = slots, 0
}

// MakeRoom evicts the oldest frames until a frame of size bytes fits, and
// reports false, without waiting, when a lossless reader still needs the
// oldest frame: the caller then calls WaitSpace and tries again. It reports
// true on a closed ring (Push is then a no-op).
func (r *Ring[T]) MakeRoom(size int) bool {
	for !r.closed && r.full(size) {
		if r.holdsOldest() {
			return false
		}
		r.evict()
	}
	return true
}

// WaitSpace waits until a lossless reader moves past the oldest frame, a
// reader closes or the ring closes. Like sync.Cond.Wait it unlocks the
// ring's lock while waiting and locks it again before returning.
func (r *Ring[T]) WaitSpace() { r.space.Wait() }

// Reserve makes room for a frame of size bytes, waiting (WaitSpace) while
// a lossless reader holds the oldest frame. It reports false once the ring
// is closed.
func (r *Ring[T]) Reserve(size int) bool {
	for !r.MakeRoom(size) {
		r.WaitSpace()
	}
	return !r.closed
}

func (r *Ring[T]) holdsOldest() bool {
	for _, rd := range r.lossless {
		if rd.next <= r.first {
			return true
		}
	}
	return false
}

func (r *Ring[T]) evict() {
	s := &r.slots[r.head]
	r.evicted = s.cursor
	r.bytes -= s.size
	*s = slot[T]{}
	r.head = (r.head + 1) % len(r.slots)
	r.n--
	r.first++
}

// Push appends a frame with its cursor (greater than every cursor pushed
// before) and size, and wakes the readers. It evicts what it must to stay
// within the limits, whatever the lossless readers; call Reserve first to
// honour them. It does nothing on a closed ring.
func (r *Ring[T]) Push(cursor int64, size int, v T) {
	if r.closed {
		return
	}
	for r.full(size) {
		r.evict()
	}
	r.grow()
	r.slots[(r.head+r.n)%len(r.slots)] = slot[T]{cursor: cursor, size: size, v: v}
	r.n++
	r.bytes += size
	r.Wake()
}

// Wake closes the channel readers wait on (a frame arrived, a reader or
// the ring closed, a filter changed) and wakes writers waiting for space.
func (r *Ring[T]) Wake() {
	if r.notify != nil {
		close(r.notify)
		r.notify = nil
	}
	r.space.Broadcast()
}

// Close ends the ring: readers read what is buffered, then io.EOF; Push
// does nothing and Reserve reports false.
func (r *Ring[T]) Close() {
	r.closed = true
	r.Wake()
}

// Wait returns a channel closed at the next Push, Wake or Close.
func (r *Ring[T]) Wait() <-chan struct{} {
	if r.notify == nil {
		r.notify = make(chan struct{})
	}
	return r.notify
}

// closedChan is returned by Ready when there is no need to wait.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Ready returns a channel that is closed once Next may have something for
// rd (a frame, a lag, the end of the ring); it is already closed when
// that is the case now.
func (r *Ring[T]) Ready(rd *Reader) <-chan struct{} {
	if r.closed || rd.closed || rd.next != r.end() {
		return closedChan
	}
	return r.Wait()
}

// seek returns the sequence number of the first buffered frame with a
// cursor greater than cursor, or a GapError when frames after cursor were
// evicted (or never buffered).
func (r *Ring[T]) seek(cursor int64) (uint64, error) {
	if cursor < 0 || cursor < r.evicted {
		return 0, &GapError{Cursor: cursor, Oldest: r.evicted}
	}
	if r.n == 0 || r.at(r.end()-1).cursor <= cursor {
		return r.end(), nil // caught up: the common case of a live reader
	}
	i := sort.Search(r.n, func(i int) bool { return r.at(r.first+uint64(i)).cursor > cursor })
	return r.first + uint64(i), nil
}

// AppendAfter appends the buffered frames with a cursor greater than
// cursor to dst, oldest first: the stateless read of a client that keeps
// its own cursor. It returns a GapError when frames after cursor are no
// longer buffered.
func (r *Ring[T]) AppendAfter(dst []T, cursor int64) ([]T, error) {
	seq, err := r.seek(cursor)
	if err != nil {
		return dst, err
	}
	for ; seq < r.end(); seq++ {
		dst = append(dst, r.at(seq).v)
	}
	return dst, nil
}

// All yields the buffered frames with their cursors, oldest first.
func (r *Ring[T]) All() iter.Seq2[int64, *T] {
	return func(yield func(int64, *T) bool) {
		for seq := r.first; seq < r.end(); seq++ {
			s := r.at(seq)
			if !yield(s.cursor, &s.v) {
				return
			}
		}
	}
}

// Start is where a reader begins.
type Start int

const (
	// Oldest starts at the oldest buffered frame.
	Oldest Start = iota
	// Newest delivers only frames pushed after the reader is made.
	Newest
	// After starts after ReaderOptions.Cursor (a resume).
	After
)

// ReaderOptions configure a reader.
type ReaderOptions struct {
	Start  Start
	Cursor int64
	// Lossless makes Reserve wait for this reader instead of evicting a
	// frame it has not read.
	Lossless bool
	// MaxBacklog, for a lossy reader, is how many unread frames it may
	// have before ErrLagged (0: only eviction lags it).
	MaxBacklog int
}

// Reader is one reader's position in a ring, set by Open. It is a value
// so that its owner can hold it in place (the reader's every poll reads
// it); it belongs to the ring that opened it and is guarded by the
// ring's lock. It must not be copied once opened.
type Reader struct {
	next       uint64
	lossless   bool
	maxBacklog int
	closed     bool
}

// Open sets rd at o.Start; with After, it returns a GapError (and leaves
// rd as it was) when the frames after o.Cursor are no longer buffered. A
// lossless reader must be closed (CloseReader) once it is no longer read.
func (r *Ring[T]) Open(rd *Reader, o ReaderOptions) error {
	next := r.first
	switch o.Start {
	case Newest:
		next = r.end()
	case After:
		seq, err := r.seek(o.Cursor)
		if err != nil {
			return err
		}
		next = seq
	}
	*rd = Reader{next: next, lossless: o.Lossless, maxBacklog: o.MaxBacklog}
	if rd.lossless {
		r.lossless = append(r.lossless, rd)
	}
	return nil
}

// CloseReader forgets rd: writers no longer wait for it, and Next returns
// ErrReaderClosed. Waiting readers and writers are woken.
func (r *Ring[T]) CloseReader(rd *Reader) {
	rd.closed = true
	if rd.lossless {
		for i, x := range r.lossless {
			if x == rd {
				r.lossless = append(r.lossless[:i], r.lossless[i+1:]...)
				break
			}
		}
	}
	r.Wake()
}

// Next returns rd's next frame and its cursor, or ok false when there is
// none yet (wait on Ready or Wait). err is ErrLagged for a lossy reader
// that fell behind (SkipToEnd resumes it), or io.EOF once the ring is
// closed and rd has read every frame, or ErrReaderClosed. The frame is
// the ring's: copy what must outlive the lock.
func (r *Ring[T]) Next(rd *Reader) (v *T, cursor int64, ok bool, err error) {
	if rd.closed {
		return nil, 0, false, ErrReaderClosed
	}
	if rd.next < r.first || (rd.maxBacklog > 0 && r.end()-rd.next > uint64(rd.maxBacklog)) {
		return nil, 0, false, ErrLagged
	}
	if rd.next == r.end() {
		if r.closed {
			return nil, 0, false, io.EOF
		}
		return nil, 0, false, nil
	}
	s := r.at(rd.next)
	rd.next++
	if rd.lossless && rd.next-1 == r.first {
		r.space.Broadcast()
	}
	return &s.v, s.cursor, true, nil
}

// SkipToEnd moves rd past every buffered frame: after ErrLagged, once the
// caller has sent what replaces them (a snapshot).
func (r *Ring[T]) SkipToEnd(rd *Reader) { rd.next = r.end() }

// Position is the cursor of the last frame rd read or skipped (the
// evicted cursor if it is behind the ring), and whether rd has read every
// buffered frame. A heartbeat that must not claim a frame still on its way
// to the reader carries this cursor.
func (r *Ring[T]) Position(rd *Reader) (cursor int64, caughtUp bool) {
	switch {
	case rd.next >= r.end():
		if r.n > 0 {
			return r.at(r.end() - 1).cursor, true
		}
		return r.evicted, true
	case rd.next > r.first:
		return r.at(rd.next - 1).cursor, false
	default:
		return r.evicted, false
	}
}
