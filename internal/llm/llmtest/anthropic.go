package llmtest

import "net/http"

// serveAnthropic answers in the Anthropic Messages streaming format.
// Placeholder: replaced by the Anthropic implementation.
func (s *Server) serveAnthropic(w http.ResponseWriter, r *http.Request, req map[string]any, turn Turn) {
	http.Error(w, "anthropic format not implemented yet", http.StatusNotImplemented)
}
