package session

import "encoding/json"

// KindRunEvent marks a record holding a workflow-level run event (a piece
// run's movement started, transition, pressure step, completion…; see
// internal/engine). Such events are not headless-protocol messages: the
// record's Event field holds the engine's own JSON encoding of the event
// ({"kind": …, "run_id": …, "seq": …, "time": …, "data": …}), and
// Record.EventType returns "" for it. Readers that only want protocol
// events skip records of this kind.
const KindRunEvent = "run_event"

// RunEvent appends a run event, already encoded as JSON, to the log.
func (s *Session) RunEvent(data json.RawMessage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.append(Record{Kind: KindRunEvent, Event: data})
}
