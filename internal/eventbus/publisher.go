package eventbus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Publisher publishes encoded events to JetStream. It keeps one
// connection that reconnects forever; Publish makes one attempt,
// PublishRetry retries with backoff until the event is acknowledged.
type Publisher struct {
	nc  *nats.Conn
	js  jetstream.JetStream
	s   Settings
	log *slog.Logger

	mu     sync.Mutex
	stream bool // the stream was created (Settings.CreateStream)
	// lim is what decides whether a follower may send events without
	// waiting for the previous one's acknowledgement (streamLimits);
	// limAt is when it was last looked up.
	lim   streamLimits
	limAt time.Time
	// serial: a later event was stored although an earlier one failed;
	// every event waits for the previous one's acknowledgement.
	serial bool

	// acks receives the acknowledgements of the events sent without
	// waiting (publishAsync).
	acks acks

	// dialErr is why the last attempt to reach the server failed (nats.go
	// keeps only the server's refusals as its LastError).
	dialErr atomic.Pointer[error]
}

// Connect connects to s.URL. The connection is made even when the server
// is down (it is retried in the background), so Maestro starts without
// NATS; Publish fails until it is up.
func Connect(s Settings, log *slog.Logger) (*Publisher, error) {
	return connect(s, log,
		nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250*time.Millisecond),
		nats.Timeout(5*time.Second),
		// Publishing while disconnected fails at once rather than
		// buffering: the log is the buffer.
		nats.ReconnectBufSize(-1),
		// Refused credentials are retried too: nats.go otherwise closes
		// the connection for good at the second refusal, and every
		// publish after it failed, "retrying", until Maestro was
		// restarted, even once the server accepted them.
		nats.IgnoreAuthErrorAbort())
}

// Dial connects to s.URL and fails at once when the server cannot be
// reached within timeout (maestro events smoke).
func Dial(s Settings, timeout time.Duration) (*Publisher, error) {
	return connect(s, nil, nats.Timeout(timeout), nats.NoReconnect())
}

func connect(s Settings, log *slog.Logger, opts ...nats.Option) (*Publisher, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// A source that is no URI reference would make every event fail to
	// encode, each skipped for good: refused before anything is read.
	if err := checkSource(s.Source); err != nil {
		return nil, fmt.Errorf("the event bus source %q (MAESTRO_EVENT_BUS_SOURCE, else event_bus.source) is not a URI reference: %w", s.Source, err)
	}
	p := &Publisher{s: s, log: log}
	opts = append(opts, nats.Name("maestro-event-bus"),
		nats.ReconnectErrHandler(func(_ *nats.Conn, err error) { p.dialErr.Store(&err) }),
		nats.ConnectHandler(func(*nats.Conn) { p.dialErr.Store(nil) }),
		nats.ReconnectHandler(func(*nats.Conn) { p.dialErr.Store(nil) }))
	if s.Token != "" {
		opts = append(opts, nats.Token(s.Token))
	}
	if s.User != "" {
		opts = append(opts, nats.UserInfo(s.User, s.Password))
	}
	nc, err := nats.Connect(s.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to the event bus %s: %w", s.urlName(), connectError(s, err))
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("open JetStream on %s: %w", s.Redacted(), err)
	}
	p.nc, p.js = nc, js
	return p, nil
}

// Close closes the connection.
func (p *Publisher) Close() { p.nc.Close() }

// ensureStream creates the stream once when the settings ask for it.
func (p *Publisher) ensureStream(ctx context.Context) error {
	if !p.s.CreateStream {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stream {
		return nil
	}
	info, err := p.js.CreateStream(ctx, jetstream.StreamConfig{
		Name:       StreamName,
		Subjects:   []string{StreamSubjects},
		Storage:    jetstream.FileStorage,
		Duplicates: 10 * time.Minute,
	})
	if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		// The stream exists with other settings (the platform's, with
		// its limits and retention): used as it is, never changed. An
		// update reset them to these (no age or size limit, the
		// description gone).
		info, err = p.js.Stream(ctx, StreamName)
	}
	if noJetStream(err) {
		err = ErrNoJetStream
	}
	if err != nil {
		return fmt.Errorf("create stream %s on %s: %w", StreamName, StreamSubjects, err)
	}
	p.stream = true
	p.lim, p.limAt = limitsOf(info.CachedInfo().Config, p.nc.MaxPayload()), time.Now()
	return nil
}

// ErrNoStream is returned when no stream takes the event's subject (and
// the settings do not create one).
var ErrNoStream = errors.New("no JetStream stream takes the subject (create it, or pass --event-bus-create-stream)")

// ErrNoJetStream is returned when the server has no JetStream (for the
// connection's account): no stream can take the events, nor be created.
var ErrNoJetStream = errors.New("the NATS server has no JetStream for this account (start nats-server with -js, or enable jetstream in its configuration)")

// noJetStream reports whether err says that the server has no JetStream:
// a JetStream API request nobody answered, or JetStream's own refusal.
func noJetStream(err error) bool {
	return errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrJetStreamNotEnabled) ||
		errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount)
}

// noStream says why no stream answered a publish: the server has no
// JetStream at all (one more request, made only then), or no stream
// takes the subject.
func (p *Publisher) noStream(ctx context.Context) error {
	if _, err := p.js.AccountInfo(ctx); noJetStream(err) {
		return ErrNoJetStream
	}
	return ErrNoStream
}

// Publish sends one encoded event on subject with id as Nats-Msg-Id and
// waits (at most 5 s) for the stream's acknowledgement. A duplicate (the
// id was stored already) is a success.
func (p *Publisher) Publish(ctx context.Context, subject, id string, data []byte) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := p.ensureStream(ctx); err != nil {
		return p.explain(err)
	}
	msg := &nats.Msg{Subject: subject, Data: data, Header: nats.Header{}}
	msg.Header.Set("Content-Type", ContentTypeCloudEvents)
	_, err := p.js.PublishMsg(ctx, msg, jetstream.WithMsgID(id))
	if errors.Is(err, jetstream.ErrNoStreamResponse) {
		return fmt.Errorf("publish %s: %w", subject, p.noStream(ctx))
	}
	if err != nil {
		return fmt.Errorf("publish %s: %w", subject, p.explain(err))
	}
	return nil
}

// ErrNotConnected is matched (errors.Is) by a publish that failed because
// the connection to NATS is down (the server is not running, not
// reachable, or restarting); the connection keeps retrying.
var ErrNotConnected = errors.New("not connected to the event bus")

// explain returns err, or, when the connection is down, an error saying
// so: nats.go then reports what it could not do (for a connection that
// never reached a server, "headers not supported by this server"), not
// why.
func (p *Publisher) explain(err error) error {
	if p.nc.IsConnected() {
		return err
	}
	why := strings.ToLower(p.nc.Status().String())
	last := p.nc.LastError()
	if last == nil {
		// Between two attempts to reconnect nats.go keeps no error: the
		// last attempt's is the reconnect error, a refusal included.
		if d := p.dialErr.Load(); d != nil {
			last = *d
		}
	}
	if isAuthError(last) {
		return fmt.Errorf("%w %s: the server refused the credentials (%s: %v): %s", ErrNotConnected, p.s.urlName(), why, last, p.s.credentialsHint())
	}
	if last != nil {
		why += ": " + last.Error()
	}
	return fmt.Errorf("%w %s: the server cannot be reached (%s)", ErrNotConnected, p.s.urlName(), why)
}

// connectError is err, a failure to connect, with what to check: the
// credentials the server refused, or the URL where no server answers.
func connectError(s Settings, err error) error {
	switch {
	case isAuthError(err):
		return fmt.Errorf("the server refused the credentials (%w): %s", err, s.credentialsHint())
	case errors.Is(err, nats.ErrNoServers):
		return fmt.Errorf("%w: is a NATS server running there?", err)
	}
	return err
}

// isAuthError tells whether err is the server refusing the connection's
// credentials.
func isAuthError(err error) bool {
	return err != nil && (errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) ||
		errors.Is(err, nats.ErrAuthRevoked) || errors.Is(err, nats.ErrAccountAuthExpired) ||
		strings.Contains(strings.ToLower(err.Error()), "authorization violation"))
}

// PublishRetry publishes until the event is acknowledged or ctx ends,
// waiting 100 ms after the first failure, doubling up to 5 s.
func (p *Publisher) PublishRetry(ctx context.Context, subject, id string, data []byte) error {
	wait := 100 * time.Millisecond
	for failures := 0; ; failures++ {
		err := p.Publish(ctx, subject, id, data)
		if err == nil {
			if failures > 0 {
				p.log.Info("event bus: published again after failures", "failures", failures)
			}
			return nil
		}
		if failures == 0 || failures%20 == 0 {
			p.log.Warn("event bus: publish failed; retrying", "subject", subject, "id", id, "err", err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("publish %s: %w (last failure: %w)", subject, ctx.Err(), err)
		case <-t.C:
		}
		wait = min(wait*2, 5*time.Second)
	}
}
