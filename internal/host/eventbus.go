package host

import (
	"cmp"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"go.opentelemetry.io/otel/trace"

	"github.com/maestro-run/maestro/internal/eventbus"
	"github.com/maestro-run/maestro/internal/session"
	"github.com/maestro-run/maestro/internal/telemetry"
)

// busState is the process's platform event publisher (docs/events.md,
// "Platform events"), opened at the first session or at EventBus when
// the environment or the configuration names a NATS server.
type busState struct {
	once sync.Once
	bus  *eventbus.Bus
}

// EventBus returns the process's event bus, nil when none is configured
// (or MAESTRO_EVENT_BUS=0) or it cannot be opened (logged). Opening it
// starts publishing, in the background, what earlier processes left
// unpublished in the session logs.
func (h *Host) EventBus() *eventbus.Bus {
	h.bus.once.Do(func() {
		s, ok := eventbus.FromEnv(h.getenv, h.cfg.EventBus)
		if !ok {
			return
		}
		b, err := eventbus.Open(eventbus.Options{Settings: s, Env: eventbus.CorrelationFromEnv(h.getenv, h.environ()), Logger: h.busLog})
		if err != nil {
			h.busLog.Warn("event bus disabled", "err", err)
			return
		}
		h.bus.bus = b
		go func() {
			if err := b.CatchUp(context.Background(), h.store.Dir()); err != nil {
				h.busLog.Warn("event bus: catch up on session logs", "err", err)
			}
		}()
	})
	return h.bus.bus
}

// warnBusSettings logs the bus settings that are ignored (a value of
// MAESTRO_EVENT_BUS that is neither way) when a bus is configured. It is
// said as the host is made, with the process's other configuration
// warnings, before a command's header: the bus opens later (with a
// session, or after serve's and worker's banners), where it was missed.
func (h *Host) warnBusSettings() {
	s, ok := eventbus.FromEnv(h.getenv, h.cfg.EventBus)
	if !ok {
		return
	}
	for _, line := range s.Ignored {
		h.busLog.Warn("event bus: setting ignored", "why", line)
	}
}

// PublishJobs publishes the job logs of st on the event bus
// (docs/events.md, "Platform events") until ctx ends, from the cursors
// st keeps (shared by every process on it; those of
// <dataDir>/eventbus-jobs.json, where a process kept its own before, are
// moved there): maestro serve and maestro worker run it beside their
// pools. It returns at once when no bus is configured.
func (h *Host) PublishJobs(ctx context.Context, st eventbus.JobSource, dataDir string) {
	if bus := h.EventBus(); bus != nil {
		if err := bus.FollowJobs(ctx, st, filepath.Join(dataDir, "eventbus-jobs.json"), 0); err != nil {
			h.busLog.Warn("event bus: follow the job logs", "err", err)
		}
	}
}

// FollowSession starts publishing the session log in dir on the event
// bus and returns what records its close (a piece run's subtasks, whose
// logs the engine keeps itself, engine.Config.FollowLog); nil when no
// bus is configured. Such a log has no ready record: the session's
// started event goes out with its first record (eventbus.NoReady). The
// close does not wait for the bus (the subtask's result would wait with
// it): the parent session's close does (eventbus.Follower.CloseLater).
func (h *Host) FollowSession(dir string, meta session.Meta) func(cursor int64, reason string) {
	if bus := h.EventBus(); bus != nil {
		return bus.FollowSession(dir, meta, eventbus.NoReady()).CloseLater
	}
	return nil
}

// sessionValues is what a session's runs see (docs/events.md, "Traces"):
// the launcher's trace context (TRACEPARENT), the ids its model requests
// to a managed gateway carry and the correlation of its spans, all from
// the environment, the session id when the launcher names none.
func (h *Host) sessionValues(sessionID string) context.Context {
	ctx := telemetry.FromEnv(context.Background(), h.getenv)
	k := telemetry.JoinKeysFromEnv(h.getenv)
	k.SessionID = cmp.Or(k.SessionID, sessionID)
	ctx = telemetry.WithJoinKeys(ctx, k)
	c := eventbus.CorrelationFromEnv(h.getenv, nil)
	c.SessionID = cmp.Or(c.SessionID, sessionID)
	return telemetry.WithAttributes(ctx, c.SpanAttributes()...)
}

// startSessionSpan starts the span of a session (docs/events.md,
// "Traces"), ended when the session closes: its turns' spans are its
// children, and it carries the session's correlation (values, from
// sessionValues).
func startSessionSpan(values context.Context) (context.Context, func()) {
	if values == nil {
		values = context.Background()
	}
	ctx, span := telemetry.Start(values, "session", trace.SpanKindInternal)
	return ctx, func() { span.End() }
}

// environ lists the MAESTRO_EVENT_BUS_ATTR_* variables as getenv reads
// them (the correlation's attributes).
func (h *Host) environ() []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "MAESTRO_EVENT_BUS_ATTR_") {
			if v := h.getenv(k); v != "" {
				out = append(out, k+"="+v)
			}
		}
	}
	return out
}
