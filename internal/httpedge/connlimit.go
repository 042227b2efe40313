package httpedge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// DefaultMaxConns is how many connections a listener keeps open at once
// unless configured otherwise (serve's --max-connections, the hosted
// runner's --max-connections). Event streams count: each holds its
// connection for as long as the client follows it.
const DefaultMaxConns = 1024

// refusalSlots bounds the connections a full listener still reads one
// request from, to answer it 503 rather than reset it: past that, a new
// connection is closed at once. Each is also bounded by the server's
// ReadHeaderTimeout.
const refusalSlots = 32

// staleNew is how long a connection may stay open without sending its
// first request before a full listener closes it to make room (a client
// sends its request as soon as it connects).
const staleNew = time.Second

// finishWait bounds how long a request past the limit waits for a
// connection that has been answered but not yet marked idle by the
// server (a matter of microseconds, longer on a loaded machine).
const finishWait = time.Second

// MaxHeaderBytes bounds a request's header (net/http's default is 1 MB):
// a connection that has not sent its whole header holds what it sent, so
// --max-connections silent connections could hold a gigabyte. Browsers
// and clients send a few kilobytes (nginx refuses more than 32 KB).
// Configure sets it on a server that sets none.
const MaxHeaderBytes = 64 << 10

// DefaultWriteIdle is how long a client may take nothing of its answer
// before its connection is closed: a client that reads nothing (a
// download, a listing) must not hold its connection and the handler for
// ever. It is longer than an event stream's bound (SSE, which sets its
// own): what a client reads is seen by the server only once its kernel
// opens its receive window again, which a client whose buffers grew (it
// read fast before, or curl --limit-rate, which reads in bursts and then
// waits) does only after reading a sixteenth of them, up to megabytes:
// with 30 s, curl --limit-rate 20k of a 200 MB deliverable was cut (its
// TCP took 3 MB at once, then nothing the server could see for a minute).
const DefaultWriteIdle = 2 * time.Minute

// connLimitLogEvery bounds the "limit reached" log line: once per period
// while connections are refused, not once per connection.
const connLimitLogEvery = time.Minute

// ConnLimit caps the open connections of one HTTP listener, so that one
// client opening thousands of idle or event-stream connections cannot use
// up the process's file descriptors and memory. Use [LimitConns] to build
// one and [ConnLimit.Configure] to wire it into the http.Server that
// serves it.
//
// When Max connections are open, a new one first takes the place of an
// idle keep-alive connection (or of one that has sent nothing for a
// second), which is closed. A connection that has none to take is
// accepted past the limit and its request read: if by then a place is
// free or idle, or once a connection that has just been answered goes
// idle, it takes that place and is served; otherwise the request is
// answered 503 with Retry-After and the connection closed, so a client
// is told to retry instead of hanging. A warning is logged when
// that happens, at most once a minute.
type ConnLimit struct {
	net.Listener
	max int
	// setting names the knob that raises the limit, for messages.
	setting string
	log     *slog.Logger

	mu        sync.Mutex
	open      int                     // admitted connections not yet closed
	perAddr   map[string]int          // admitted connections by client address
	gets      map[*limitedConn]uint64 // admitted connections serving a GET or HEAD, in order
	getSeq    uint64
	states    map[*limitedConn]connAge // admitted connections that may be reclaimed
	refusing  int                      // over-limit connections being answered 503
	finishing int                      // admitted connections answered, not yet idle or closed
	// wake is closed (and replaced) when a place may have been given
	// back: a connection closed, went idle or stopped finishing.
	wake     chan struct{}
	refused  int // refused since the last log line
	logged   time.Time
	taken    int // GETs closed for another address since the last log line
	takenLog time.Time
	now      func() time.Time
	// writeIdle bounds a write that makes no progress (DefaultWriteIdle).
	writeIdle time.Duration
	// changed, when set (tests), is called after a connection is released.
	changed func()
}

// connAge is the reclaimable state of a connection and since when.
type connAge struct {
	state http.ConnState
	since time.Time
}

// LimitConns wraps ln so that at most max connections are open at once
// (max < 1: DefaultMaxConns). setting names what raises the limit
// ("--max-connections") in the 503 message and the log line.
func LimitConns(ln net.Listener, max int, setting string, log *slog.Logger) *ConnLimit {
	if max < 1 {
		max = DefaultMaxConns
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var rl syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl) == nil {
		if msg := fdHeadroom(max, setting, rl.Cur); msg != "" {
			log.Warn(msg)
		}
	}
	return &ConnLimit{Listener: ln, max: max, setting: setting, log: log,
		states: map[*limitedConn]connAge{}, perAddr: map[string]int{}, gets: map[*limitedConn]uint64{},
		wake: make(chan struct{}), now: time.Now, writeIdle: DefaultWriteIdle}
}

// fdReserve is how many descriptors a process keeps for its own files,
// databases and child processes besides its connections.
const fdReserve = 256

// fdHeadroom warns when max connections would leave fewer than fdReserve
// descriptors of the process's limit nofile: the limit then does not
// keep the process able to open its own files.
func fdHeadroom(max int, setting string, nofile uint64) string {
	if uint64(max)+fdReserve <= nofile { // RLIM_INFINITY is the largest uint64
		return ""
	}
	return fmt.Sprintf("%s %d leaves fewer than %d of this process's %d file descriptors (ulimit -n) for its own files: lower it, or raise the descriptor limit",
		setting, max, fdReserve, nofile)
}

// Max is the limit.
func (l *ConnLimit) Max() int { return l.max }

// Open is how many connections are open within the limit.
func (l *ConnLimit) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open
}

// Accept returns the next connection: one within the limit, or one past
// it whose request the server answers 503 (see Configure). Connections
// past the limit and past the refusal slots are closed here.
func (l *ConnLimit) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		lc, ok := l.admit(c)
		if ok {
			return lc, nil
		}
		c.Close()
	}
}

// admit wraps c: within the limit, after reclaiming an idle connection
// if need be, or as a refused connection while refusal slots are free;
// false when c is to be closed at once.
func (l *ConnLimit) admit(c net.Conn) (*limitedConn, bool) {
	l.mu.Lock()
	now := l.now()
	var victim *limitedConn
	if l.open >= l.max {
		victim = l.reclaimable(now)
		if victim != nil {
			l.drop(victim)
		}
	}
	lc := &limitedConn{Conn: c, l: l, addr: addrOf(c)}
	switch {
	case l.open < l.max:
		l.take(lc)
		l.states[lc] = connAge{state: http.StateNew, since: now}
	case l.refusing < refusalSlots:
		// Refused when its request is read, unless a place is free by
		// then (place).
		lc.over = true
		l.refusing++
	default:
		l.noteRefusal(now)
		lc = nil
	}
	l.mu.Unlock()
	if victim != nil {
		victim.Conn.Close()
		l.notify()
	}
	if lc == nil {
		return nil, false
	}
	if sc, ok := c.(syscall.Conn); ok {
		lc.raw, _ = sc.SyscallConn()
	}
	return lc, true
}

// reclaimable is the connection a full listener closes to make room: the
// longest idle keep-alive connection, else one that has sent nothing for
// staleNew; nil when every connection is busy (l.mu held).
func (l *ConnLimit) reclaimable(now time.Time) *limitedConn {
	var best *limitedConn
	var bestAge connAge
	for c, a := range l.states {
		if a.state == http.StateNew && now.Sub(a.since) < staleNew {
			continue
		}
		if best == nil || a.state == http.StateIdle && bestAge.state != http.StateIdle ||
			a.state == bestAge.state && a.since.Before(bestAge.since) {
			best, bestAge = c, a
		}
	}
	return best
}

// noteRefusal counts a refused connection and logs, at most once per
// connLimitLogEvery, that the limit is reached (l.mu held).
func (l *ConnLimit) noteRefusal(now time.Time) {
	l.refused++
	if !l.logged.IsZero() && now.Sub(l.logged) < connLimitLogEvery {
		return
	}
	l.log.Warn(fmt.Sprintf("connection limit reached: %d connections open, none idle; new connections are answered 503 until some close (raise it with %s)", l.open, l.setting),
		"max_connections", l.max, "refused", l.refused)
	l.logged, l.refused = now, 0
}

// unfinish clears c's finishing mark (l.mu held).
func (l *ConnLimit) unfinish(c *limitedConn) {
	if c.finishing {
		c.finishing = false
		l.finishing--
	}
}

// broadcast wakes the requests waiting in place (l.mu held).
func (l *ConnLimit) broadcast() {
	close(l.wake)
	l.wake = make(chan struct{})
}

// place gives a connection accepted past the limit a place, once its
// request is read: a free one, an idle one (closed), or, while a
// connection that has been answered is not yet idle, the first that goes
// idle within finishWait, or the place of a GET of the address holding
// more than half of the places (takeover). It reports false when the
// request is to be refused. A connection within the limit has its place
// already.
func (l *ConnLimit) place(ctx context.Context, c *limitedConn) bool {
	var timeout <-chan time.Time
	waited := false
	l.mu.Lock()
	for c.over {
		now := l.now()
		var victim *limitedConn
		if l.open >= l.max {
			victim = l.reclaimable(now)
			if victim == nil && (l.finishing == 0 || waited) {
				victim = l.takeover(c, now)
			}
			if victim != nil {
				l.drop(victim)
			}
		}
		if l.open < l.max {
			c.over = false
			l.refusing--
			l.take(c)
			l.mu.Unlock()
			if victim != nil {
				victim.Conn.Close()
				l.notify()
			}
			return true
		}
		if l.finishing == 0 || waited {
			break
		}
		if timeout == nil {
			t := time.NewTimer(finishWait)
			defer t.Stop()
			timeout = t.C
		}
		wake := l.wake
		l.mu.Unlock()
		select {
		case <-wake:
		case <-timeout:
			waited = true
		case <-ctx.Done():
			return false
		}
		l.mu.Lock()
	}
	over := c.over
	if over {
		l.noteRefusal(l.now())
	}
	l.mu.Unlock()
	return !over
}

// take gives c a place (l.mu held).
func (l *ConnLimit) take(c *limitedConn) {
	l.open++
	l.perAddr[c.addr]++
}

// drop takes c's place back (l.mu held).
func (l *ConnLimit) drop(c *limitedConn) {
	c.released = true
	l.open--
	if l.perAddr[c.addr]--; l.perAddr[c.addr] <= 0 {
		delete(l.perAddr, c.addr)
	}
	delete(l.states, c)
	delete(l.gets, c)
	l.unfinish(c)
}

// takeover is the connection a full listener with none idle closes to
// serve c's request: when one client address holds more than half of
// the places and c comes from another, the longest-running GET (or HEAD)
// request of that address, most likely an event stream, which its client
// can resume. nil when there is none (l.mu held).
func (l *ConnLimit) takeover(c *limitedConn, now time.Time) *limitedConn {
	hog, n := "", 0
	for a, k := range l.perAddr {
		if k > n {
			hog, n = a, k
		}
	}
	if n <= l.max/2 || hog == c.addr {
		return nil
	}
	var victim *limitedConn
	var first uint64
	for g, seq := range l.gets {
		if g.addr == hog && (victim == nil || seq < first) {
			victim, first = g, seq
		}
	}
	if victim == nil {
		return nil
	}
	l.taken++
	if l.takenLog.IsZero() || now.Sub(l.takenLog) >= connLimitLogEvery {
		l.log.Warn(fmt.Sprintf("connection limit reached: client address %s holds %d of the %d connections, none idle; its longest-running GET requests are closed to serve other addresses (one address keeps at most half of the limit while others wait)", hog, n, l.max),
			"max_connections", l.max, "closed", l.taken)
		l.takenLog, l.taken = now, 0
	}
	return victim
}

// serving records that c serves a GET or HEAD request, which takeover
// may end.
func (l *ConnLimit) serving(c *limitedConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !c.over && !c.released {
		l.getSeq++
		l.gets[c] = l.getSeq
	}
}

// addrOf is the client address of c, without its port.
func addrOf(c net.Conn) string {
	a := c.RemoteAddr().String()
	if h, _, err := net.SplitHostPort(a); err == nil {
		return h
	}
	return a
}

// finished marks c, whose request's handler has returned, as answered
// and about to be idle or closed (an HTTP/1 connection serves one
// request at a time).
func (l *ConnLimit) finished(c *limitedConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.gets, c)
	if !c.over && !c.released && !c.hijacked && !c.finishing {
		c.finishing = true
		l.finishing++
	}
}

func (l *ConnLimit) notify() {
	if l.changed != nil {
		l.changed()
	}
}

// release frees c's place (once).
func (l *ConnLimit) release(c *limitedConn) {
	l.mu.Lock()
	done := c.released
	if !done {
		if c.over {
			c.released = true
			l.refusing--
		} else {
			l.drop(c)
		}
		l.broadcast()
	}
	l.mu.Unlock()
	if !done {
		l.notify()
	}
}

// connState tracks which connections are idle (http.Server.ConnState).
func (l *ConnLimit) connState(c net.Conn, s http.ConnState) {
	lc, ok := c.(*limitedConn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if lc.released || lc.over {
		return
	}
	switch s {
	case http.StateIdle:
		l.states[lc] = connAge{state: s, since: l.now()}
		l.unfinish(lc)
		l.broadcast()
	case http.StateActive, http.StateHijacked, http.StateClosed:
		// Busy (or no longer the server's): not to be reclaimed. A
		// hijacked connection still counts until its owner closes it.
		delete(l.states, lc)
		l.unfinish(lc)
		if s == http.StateHijacked {
			lc.hijacked = true
		}
	}
}

type connKey struct{}

// Configure wires the limit into srv, which is to serve l: it tracks idle
// connections (ConnState) and answers every request of a connection past
// the limit 503 with Retry-After, in the shape surface picks (nil: REST),
// closing the connection after it. It bounds what each connection holds
// before its request is read: MaxHeaderBytes unless srv sets a bound.
func (l *ConnLimit) Configure(srv *http.Server, surface func(*http.Request) Surface) {
	if srv.MaxHeaderBytes == 0 {
		srv.MaxHeaderBytes = MaxHeaderBytes
	}
	prevState, prevCtx, next := srv.ConnState, srv.ConnContext, srv.Handler
	srv.ConnState = func(c net.Conn, s http.ConnState) {
		l.connState(c, s)
		if prevState != nil {
			prevState(c, s)
		}
	}
	srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		if lc, ok := c.(*limitedConn); ok {
			ctx = context.WithValue(ctx, connKey{}, lc)
		}
		if prevCtx != nil {
			ctx = prevCtx(ctx, c)
		}
		return ctx
	}
	srv.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lc, _ := r.Context().Value(connKey{}).(*limitedConn)
		if lc == nil || l.place(r.Context(), lc) {
			if lc != nil && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
				l.serving(lc)
			}
			next.ServeHTTP(w, r)
			if lc != nil && r.ProtoMajor == 1 {
				l.finished(lc)
			}
			return
		}
		s := REST
		if surface != nil {
			s = surface(r)
		}
		w.Header().Set("Connection", "close")
		Refuse(w, r, s, &Error{Status: http.StatusServiceUnavailable, Code: CodeRuntimeNotReady, RetryAfter: 1,
			Message: fmt.Sprintf("this server has reached its limit of %d open connections (%s), none of them idle: try again shortly", l.max, l.setting)})
	})
}

// limitedConn is a connection of a ConnLimit: Close releases its place.
type limitedConn struct {
	net.Conn
	l *ConnLimit
	// addr is the client's address (without port).
	addr string
	// over (under l.mu): accepted past the limit, to be answered 503
	// unless place finds it a place.
	over bool
	// released (under l.mu): its place was given back.
	released bool
	// finishing (under l.mu): its request answered, not yet idle.
	finishing bool
	// hijacked (under l.mu): no longer the server's.
	hijacked bool
	// ownDeadline: a write deadline set by the connection's owner.
	ownDeadline atomic.Bool
	// wdeadline is the write deadline Write set (Unix ns; 0: none, or
	// the owner changed it since).
	wdeadline atomic.Int64
	// wmu serializes Write; under it, the write idle window: what the
	// client had not acknowledged when it started (q, when qKnown) and
	// what was written since.
	wmu    sync.Mutex
	q      int
	qKnown bool
	wrote  int
	// raw is the socket, to ask how much of the answer the client has
	// acknowledged (nil: not a socket).
	raw syscall.RawConn
}

// Write writes p under the limit's write idle time, unless the
// connection's owner (an event stream) set a write deadline of its own:
// once the client has taken nothing of its answer for that long (the
// kernel took none of what was written, and the client acknowledged none
// of what the kernel holds), the connection is closed and Write fails. A
// client that keeps reading, however slowly, is never cut: the kernel
// lets a blocked write go on only once about a third of the socket's send
// buffer (up to megabytes) has gone, so that a deadline on each write
// alone cut a download read steadily at less than that per write idle
// time. The deadline is moved on at most every writeIdle/8, not at each
// write, so that small answers cost no timer and no system call.
func (c *limitedConn) Write(p []byte) (int, error) {
	idle := c.l.writeIdle
	if idle <= 0 || c.ownDeadline.Load() {
		return c.Conn.Write(p)
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if now := time.Now(); c.wdeadline.Load() == 0 || time.Unix(0, c.wdeadline.Load()).Sub(now) < idle-idle/8 {
		c.window(now, idle)
	}
	n := 0
	for {
		k, err := c.Conn.Write(p[n:])
		n += k
		c.wrote += k
		if ne, ok := errors.AsType[net.Error](err); !ok || !ne.Timeout() {
			return n, err
		}
		// The deadline passed: did the client take anything since it
		// was set?
		q, ok := c.unacked()
		if c.wrote == 0 && (!c.qKnown || !ok || q >= c.q) ||
			c.wrote > 0 && c.qKnown && ok && q >= c.q+c.wrote {
			// Nothing: give its place back.
			c.Conn.Close()
			return n, err
		}
		c.window(time.Now(), idle)
	}
}

// window starts a write idle window at now: the write deadline, and how
// much the client had not acknowledged then (c.wmu held).
func (c *limitedConn) window(now time.Time, idle time.Duration) {
	d := now.Add(idle)
	c.wdeadline.Store(d.UnixNano())
	c.Conn.SetWriteDeadline(d)
	c.q, c.qKnown = c.unacked()
	c.wrote = 0
}

// unacked is how many bytes written to the connection the client has not
// acknowledged; false when that cannot be told (not Linux, not TCP).
func (c *limitedConn) unacked() (int, bool) {
	if c.raw == nil {
		return 0, false
	}
	return unacked(c.raw)
}

// SetWriteDeadline sets the connection's write deadline; while it is
// set, Write puts none of its own. Clearing it (net/http does after every
// request) gives the connection back to Write's own deadline, which
// stays set: Write moves it on itself.
func (c *limitedConn) SetWriteDeadline(t time.Time) error {
	if t.IsZero() && c.l.writeIdle > 0 && !c.ownDeadline.Load() {
		return nil
	}
	c.ownDeadline.Store(!t.IsZero())
	c.wdeadline.Store(0)
	return c.Conn.SetWriteDeadline(t)
}

// SetDeadline sets the read and write deadlines (see SetWriteDeadline).
func (c *limitedConn) SetDeadline(t time.Time) error {
	if err := c.Conn.SetReadDeadline(t); err != nil {
		return err
	}
	return c.SetWriteDeadline(t)
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.l.release(c)
	return err
}

// CloseWrite half-closes the connection when it can, which the server
// does before closing a connection it answered without reading the whole
// request (the 503 above), so that the client reads the answer.
func (c *limitedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
