package queue

import (
	"log/slog"
	"time"
)

// outageRepeat is how often a store call that keeps failing is logged
// again while it fails.
const outageRepeat = 30 * time.Second

// Outage logs the failures of one repeated store call (a claim, a leader
// election, a process heartbeat) as an operator wants to read them during
// an outage of the database: the first failure with its error, then at
// most one reminder every 30 s with the count so far, and one line when
// the call works again. Polled every second, a call logged a warning per
// try.
type Outage struct {
	What string // "claim", "leader election"
	// Hint follows "<What> failed" on the first failure's line (what it
	// means, what to check); Attrs lead each line's attributes.
	Hint  string
	Attrs []any
	Log   *slog.Logger
	Now   func() time.Time

	n           int // failures in a row
	since, last time.Time
}

// Failed records a failure of the call.
func (o *Outage) Failed(err error) {
	now := o.Now()
	o.n++
	switch {
	case o.n == 1:
		o.since, o.last = now, now
		o.Log.Warn(o.What+" failed"+o.Hint, append(o.Attrs[:len(o.Attrs):len(o.Attrs)], "err", err)...)
	case now.Sub(o.last) >= outageRepeat:
		o.last = now
		o.Log.Warn(o.What+" still failing", append(o.Attrs[:len(o.Attrs):len(o.Attrs)], "failures", o.n, "for", now.Sub(o.since).Round(time.Second).String(), "err", err)...)
	}
}

// OK records a success of the call.
func (o *Outage) OK() {
	if o.n == 0 {
		return
	}
	o.Log.Info(o.What+" works again", append(o.Attrs[:len(o.Attrs):len(o.Attrs)], "failures", o.n, "after", o.Now().Sub(o.since).Round(time.Second).String())...)
	o.n = 0
}
