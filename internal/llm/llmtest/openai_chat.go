package llmtest

import "net/http"

// serveChat answers in the OpenAI Chat Completions streaming format.
// Placeholder: replaced by the OpenAI implementation.
func (s *Server) serveChat(w http.ResponseWriter, r *http.Request, req map[string]any, turn Turn) {
	http.Error(w, "chat format not implemented yet", http.StatusNotImplemented)
}
