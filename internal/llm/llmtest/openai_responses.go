package llmtest

import "net/http"

// serveResponses answers in the OpenAI Responses streaming format.
// Placeholder: replaced by the OpenAI implementation.
func (s *Server) serveResponses(w http.ResponseWriter, r *http.Request, req map[string]any, turn Turn) {
	http.Error(w, "responses format not implemented yet", http.StatusNotImplemented)
}
