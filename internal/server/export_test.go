package server

// Feeds returns how many job feeds are running (tests).
func (s *Server) Feeds() int {
	s.feeds.mu.Lock()
	defer s.feeds.mu.Unlock()
	return len(s.feeds.m)
}

// OnFeedStopped calls f whenever a job feed stops; set it before the
// first stream opens.
func (s *Server) OnFeedStopped(f func()) { s.feeds.onStopped = f }

// QueryParams lists the query parameters a route takes (tests).
func QueryParams(pattern string) []string { return queryParams[pattern] }

// WorkerPayloadFields lists the payload fields a worker reads (tests).
func WorkerPayloadFields() []string { return workerPayloadFields }
