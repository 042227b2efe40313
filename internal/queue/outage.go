package queue

import (
	"log/slog"
	"time"
)

// outageRepeat is how often a store call that keeps failing is logged
// again while it fails.
const outageRepeat = 30 * time.Second

// outage logs the failures of one repeated store call (a claim, a leader
// election) as an operator wants to read them during an outage of the
// database: the first failure with its error, then at most one reminder
// every outageRepeat with the count so far, and one line when the call
// works again. Polled every second, a call logged a warning per try.
type outage struct {
	what string // "claim", "leader election"
	log  *slog.Logger
	now  func() time.Time

	n           int // failures in a row
	since, last time.Time
}

// failed records a failure of the call.
func (o *outage) failed(err error) {
	now := o.now()
	o.n++
	switch {
	case o.n == 1:
		o.since, o.last = now, now
		o.log.Warn(o.what+" failed", "err", err)
	case now.Sub(o.last) >= outageRepeat:
		o.last = now
		o.log.Warn(o.what+" still failing", "failures", o.n, "for", now.Sub(o.since).Round(time.Second).String(), "err", err)
	}
}

// ok records a success of the call.
func (o *outage) ok() {
	if o.n == 0 {
		return
	}
	o.log.Info(o.what+" works again", "failures", o.n, "after", o.now().Sub(o.since).Round(time.Second).String())
	o.n = 0
}
