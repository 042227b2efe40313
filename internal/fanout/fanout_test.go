package fanout

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
)

// ring is a Ring[string] with its lock, for tests; frames are sized by
// their length.
type ring struct {
	mu sync.Mutex
	*Ring[string]
}

func newRing(l Limits, start int64) *ring {
	r := &ring{}
	r.Ring = New[string](&r.mu, l, start)
	return r
}

// push pushes frames with the given cursors, each named f<cursor>.
func (r *ring) push(cursors ...int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range cursors {
		v := fmt.Sprintf("f%d", c)
		r.Push(c, len(v), v)
	}
}

// read reads what rd has now: the frames, then the error that stopped it
// (nil when it simply caught up).
func (r *ring) read(rd *Reader) ([]string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for {
		v, _, ok, err := r.Next(rd)
		if err != nil || !ok {
			return out, err
		}
		out = append(out, *v)
	}
}

func (r *ring) reader(o ReaderOptions) (*Reader, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rd := &Reader{}
	if err := r.Open(rd, o); err != nil {
		return nil, err
	}
	return rd, nil
}

// TestResumeAndGap: a reader made After a cursor gets exactly the
// buffered frames with greater cursors (cursors need not be consecutive);
// a cursor whose next frames were evicted, a negative cursor and a cursor
// before the ring's start are gaps; Oldest and Newest start at the ends.
func TestResumeAndGap(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		start  int64
		frames int
		push   []int64
		opts   ReaderOptions
		want   []string
		gap    bool
	}{
		{"after a middle cursor", 0, 8, []int64{1, 2, 5, 9}, ReaderOptions{Start: After, Cursor: 2}, []string{"f5", "f9"}, false},
		{"after a cursor between frames", 0, 8, []int64{1, 2, 5, 9}, ReaderOptions{Start: After, Cursor: 3}, []string{"f5", "f9"}, false},
		{"after the newest", 0, 8, []int64{1, 2}, ReaderOptions{Start: After, Cursor: 2}, nil, false},
		{"after a future cursor", 0, 8, []int64{1, 2}, ReaderOptions{Start: After, Cursor: 99}, nil, false},
		{"after the start of an empty ring", 7, 8, nil, ReaderOptions{Start: After, Cursor: 7}, nil, false},
		{"before the start", 7, 8, []int64{8}, ReaderOptions{Start: After, Cursor: 6}, nil, true},
		{"negative", 0, 8, []int64{1}, ReaderOptions{Start: After, Cursor: -1}, nil, true},
		{"after the newest evicted", 0, 2, []int64{1, 2, 3, 4}, ReaderOptions{Start: After, Cursor: 2}, []string{"f3", "f4"}, false},
		{"before the newest evicted", 0, 2, []int64{1, 2, 3, 4}, ReaderOptions{Start: After, Cursor: 1}, nil, true},
		{"oldest", 0, 2, []int64{1, 2, 3}, ReaderOptions{Start: Oldest}, []string{"f2", "f3"}, false},
		{"newest", 0, 4, []int64{1, 2, 3}, ReaderOptions{Start: Newest}, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRing(Limits{Frames: tt.frames}, tt.start)
			r.push(tt.push...)
			rd, err := r.reader(tt.opts)
			var gap *GapError
			if tt.gap {
				if !errors.As(err, &gap) {
					t.Fatalf("Open: %v, want a GapError", err)
				}
			} else if err != nil {
				t.Fatalf("Open: %v", err)
			}
			var stateless []string
			r.mu.Lock()
			stateless, aerr := r.AppendAfter(nil, tt.opts.Cursor)
			r.mu.Unlock()
			if tt.opts.Start == After && tt.gap != errors.As(aerr, &gap) {
				t.Errorf("AppendAfter: %v, gap want %v", aerr, tt.gap)
			}
			if tt.gap {
				return
			}
			got, err := r.read(rd)
			if err != nil {
				t.Fatalf("read: %v", err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("read %v, want %v", got, tt.want)
			}
			if tt.opts.Start == After && !slices.Equal(stateless, tt.want) {
				t.Errorf("AppendAfter %v, want %v", stateless, tt.want)
			}
		})
	}
}

// TestLag: a lossy reader whose next frame was evicted, or that has more
// than MaxBacklog unread frames, gets ErrLagged until SkipToEnd; it then
// reads only what comes next.
func TestLag(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		frames  int
		backlog int
		push    int
		lagged  bool
	}{
		{"within the ring", 4, 0, 4, false},
		{"behind the ring", 4, 0, 5, true},
		{"within the backlog", 8, 3, 3, false},
		{"beyond the backlog", 8, 3, 4, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRing(Limits{Frames: tt.frames}, 0)
			rd, err := r.reader(ReaderOptions{Start: Newest, MaxBacklog: tt.backlog})
			if err != nil {
				t.Fatal(err)
			}
			for c := range int64(tt.push) {
				r.push(c + 1)
			}
			got, err := r.read(rd)
			if !tt.lagged {
				if err != nil || len(got) != tt.push {
					t.Fatalf("read %v, %v; want %d frames", got, err, tt.push)
				}
				return
			}
			if !errors.Is(err, ErrLagged) || len(got) != 0 {
				t.Fatalf("read %v, %v; want ErrLagged at once", got, err)
			}
			r.mu.Lock()
			if c, caughtUp := r.Position(rd); caughtUp || c != r.Evicted() {
				t.Errorf("Position of a lagged reader = %d, %v; want the evicted cursor %d, false", c, caughtUp, r.Evicted())
			}
			r.SkipToEnd(rd)
			r.mu.Unlock()
			r.push(int64(tt.push) + 1)
			if got, err := r.read(rd); err != nil || !slices.Equal(got, []string{fmt.Sprintf("f%d", tt.push+1)}) {
				t.Errorf("after SkipToEnd: %v, %v", got, err)
			}
		})
	}
}

// TestByteBound: the ring evicts by bytes as well as by count, keeps a
// frame larger than the bound alone, and its accounting returns to zero.
func TestByteBound(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		bytes     int
		sizes     []int
		wantLen   int
		wantBytes int
	}{
		{"fits", 10, []int{3, 3, 3}, 3, 9},
		{"evicts the oldest", 10, []int{4, 4, 4}, 2, 8},
		{"one frame over the bound", 10, []int{4, 25}, 1, 25},
		{"small after large", 10, []int{25, 1}, 1, 1},
		{"no bound", 0, []int{1 << 20, 1 << 20}, 2, 2 << 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRing(Limits{Frames: 100, Bytes: tt.bytes}, 0)
			r.mu.Lock()
			defer r.mu.Unlock()
			for i, size := range tt.sizes {
				r.Push(int64(i+1), size, "x")
			}
			if r.Len() != tt.wantLen || r.Bytes() != tt.wantBytes {
				t.Errorf("holds %d frames, %d bytes; want %d, %d", r.Len(), r.Bytes(), tt.wantLen, tt.wantBytes)
			}
			if want := int64(len(tt.sizes) - tt.wantLen); r.Evicted() != want {
				t.Errorf("Evicted() = %d, want %d", r.Evicted(), want)
			}
			var cursors []int64
			for c := range r.All() {
				cursors = append(cursors, c)
			}
			if len(cursors) != tt.wantLen || (len(cursors) > 0 && cursors[len(cursors)-1] != int64(len(tt.sizes))) {
				t.Errorf("All() yields cursors %v", cursors)
			}
		})
	}
}

// TestClose: after Close a reader reads what was buffered, then io.EOF;
// Push does nothing, Reserve reports false and Ready is closed.
func TestClose(t *testing.T) {
	t.Parallel()
	r := newRing(Limits{Frames: 4}, 0)
	rd, _ := r.reader(ReaderOptions{Start: Oldest, Lossless: true})
	r.push(1, 2)
	r.mu.Lock()
	wait := r.Ready(rd)
	r.Close()
	r.Push(3, 1, "late")
	reserved := r.Reserve(1)
	r.mu.Unlock()
	select {
	case <-wait:
	default:
		t.Error("Ready was not closed by Close")
	}
	if reserved {
		t.Error("Reserve on a closed ring reported true")
	}
	got, err := r.read(rd)
	if !slices.Equal(got, []string{"f1", "f2"}) || !errors.Is(err, io.EOF) {
		t.Errorf("after Close: %v, %v; want [f1 f2], io.EOF", got, err)
	}
}

// TestLosslessBackpressure: a writer that Reserves waits while a lossless
// reader has not read the oldest frame, instead of evicting it; reading
// (or closing the reader) lets it go on, and every frame arrives in order.
func TestLosslessBackpressure(t *testing.T) {
	t.Parallel()
	for _, release := range []string{"read", "close reader"} {
		t.Run(release, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newRing(Limits{Frames: 3}, 0)
				rd, _ := r.reader(ReaderOptions{Start: Oldest, Lossless: true})
				pushed := make(chan int64, 10)
				go func() {
					for c := int64(1); c <= 6; c++ {
						r.mu.Lock()
						if r.Reserve(1) {
							r.Push(c, 1, fmt.Sprintf("f%d", c))
						}
						r.mu.Unlock()
						pushed <- c
					}
					close(pushed)
				}()
				synctest.Wait()
				if n := len(pushed); n != 3 {
					t.Fatalf("%d frames pushed before the reader read, want 3 (the ring)", n)
				}
				if release == "close reader" {
					r.mu.Lock()
					r.CloseReader(rd)
					r.mu.Unlock()
					synctest.Wait()
					if n := len(pushed); n != 6 {
						t.Fatalf("%d frames pushed after the reader closed, want 6", n)
					}
					return
				}
				var got []string
				for len(got) < 6 {
					r.mu.Lock()
					wait := r.Ready(rd)
					r.mu.Unlock()
					<-wait
					frames, err := r.read(rd)
					if err != nil {
						t.Fatal(err)
					}
					got = append(got, frames...)
					synctest.Wait()
				}
				if want := []string{"f1", "f2", "f3", "f4", "f5", "f6"}; !slices.Equal(got, want) {
					t.Errorf("read %v, want %v", got, want)
				}
			})
		})
	}
}

// TestWaitAndPosition: Ready is open while a reader is caught up and
// closes at the next Push; Position follows what the reader has read.
func TestWaitAndPosition(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		r := newRing(Limits{Frames: 4}, 10)
		rd, _ := r.reader(ReaderOptions{Start: Newest})
		r.mu.Lock()
		if c, caughtUp := r.Position(rd); c != 10 || !caughtUp {
			t.Errorf("empty ring: Position = %d, %v; want 10, true", c, caughtUp)
		}
		wait := r.Ready(rd)
		r.mu.Unlock()
		got := make(chan []string)
		go func() {
			<-wait
			frames, _ := r.read(rd)
			got <- frames
		}()
		synctest.Wait()
		r.push(12, 15)
		if frames := <-got; len(frames) == 0 || frames[0] != "f12" {
			t.Fatalf("woken reader read %v", frames)
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if c, caughtUp := r.Position(rd); c != 15 || !caughtUp {
			t.Errorf("caught up: Position = %d, %v; want 15, true", c, caughtUp)
		}
		r.Push(16, 1, "x")
		if c, caughtUp := r.Position(rd); c != 15 || caughtUp {
			t.Errorf("one unread: Position = %d, %v; want 15, false", c, caughtUp)
		}
	})
}

// BenchmarkFanout pushes one frame per iteration to N lossy readers, each
// reading it on its own goroutine: ns/op is the time to deliver one frame
// to all of them (the ring alone, without transport).
func BenchmarkFanout(b *testing.B) {
	for _, n := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("readers=%d", n), func(b *testing.B) {
			r := newRing(Limits{Frames: 1024, Bytes: 8 << 20}, 0)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			got := make(chan struct{}, n)
			var done sync.WaitGroup
			for range n {
				rd, _ := r.reader(ReaderOptions{Start: Newest})
				done.Go(func() {
					for {
						r.mu.Lock()
						_, _, ok, err := r.Next(rd)
						wait := r.Ready(rd)
						r.mu.Unlock()
						if err != nil {
							return
						}
						if ok {
							got <- struct{}{}
							continue
						}
						select {
						case <-wait:
						case <-ctx.Done():
							return
						}
					}
				})
			}
			b.ResetTimer()
			for i := range b.N {
				r.mu.Lock()
				r.Reserve(64)
				r.Push(int64(i+1), 64, "frame")
				r.mu.Unlock()
				for range n {
					<-got
				}
			}
			b.StopTimer()
			r.mu.Lock()
			r.Close()
			r.mu.Unlock()
			done.Wait()
		})
	}
}

// TestGrowOnDemand: the slots grow as frames arrive, never beyond the
// frame limit, and keep the frames in order when they grow after
// evictions moved the oldest frame (byte bound) — the ring holds what a
// plain list with the same eviction rule holds.
func TestGrowOnDemand(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		limits Limits
		sizes  []int // frame sizes, pushed in order
		slots  int   // at most this many slots at the end
	}{
		{"few frames, large limit", Limits{Frames: 1024}, []int{1, 1, 1}, minSlots},
		{"grows to the limit", Limits{Frames: 20}, slices.Repeat([]int{1}, 50), 20},
		{"limit of one", Limits{Frames: 1}, []int{1, 1, 1}, 1},
		{"grows after byte evictions wrapped it", Limits{Frames: 64, Bytes: 40},
			append(slices.Repeat([]int{5}, 20), slices.Repeat([]int{1}, 30)...), 64},
		{"byte bound keeps it small", Limits{Frames: 1024, Bytes: 30}, slices.Repeat([]int{3}, 200), 16},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRing(tt.limits, 0)
			type frame struct {
				cursor int64
				size   int
			}
			var model []frame
			sum := func() (s int) {
				for _, f := range model {
					s += f.size
				}
				return s
			}
			r.mu.Lock()
			for i, size := range tt.sizes {
				c := int64(i + 1)
				r.Push(c, size, fmt.Sprintf("f%d", c))
				for len(model) >= tt.limits.Frames || (tt.limits.Bytes > 0 && len(model) > 0 && sum()+size > tt.limits.Bytes) {
					model = model[1:]
				}
				model = append(model, frame{c, size})
			}
			slots := len(r.slots)
			r.mu.Unlock()
			var want []string
			for _, f := range model {
				want = append(want, fmt.Sprintf("f%d", f.cursor))
			}
			rd, err := r.reader(ReaderOptions{Start: Oldest})
			if err != nil {
				t.Fatal(err)
			}
			got, err := r.read(rd)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Errorf("read %v, want %v", got, want)
			}
			if slots > tt.slots || slots > tt.limits.Frames {
				t.Errorf("%d slots, want at most %d (limit %d)", slots, tt.slots, tt.limits.Frames)
			}
		})
	}
}
