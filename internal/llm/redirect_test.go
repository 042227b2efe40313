package llm

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestSameOriginRedirect: DefaultHTTPClient follows a redirect within the
// origin and refuses one to another origin (another host or port, or
// https to http).
func TestSameOriginRedirect(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/old":
			http.Redirect(w, r, "/new", http.StatusTemporaryRedirect)
		case "/new":
			w.WriteHeader(http.StatusNoContent)
		case "/away":
			http.Redirect(w, r, "http://localhost:1/x", http.StatusTemporaryRedirect)
		}
	}))
	t.Cleanup(srv.Close)
	c := DefaultHTTPClient()
	resp, err := c.Get(srv.URL + "/old")
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("same-origin redirect: %v, %v", resp, err)
	}
	resp.Body.Close()
	if resp, err := c.Get(srv.URL + "/away"); err == nil {
		resp.Body.Close()
		t.Fatal("a redirect to another origin was followed")
	}
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{"https://api.example.com/v1", "https://API.example.com:443/x", true},
		{"http://h/v1", "http://h:80/", true},
		{"https://h/", "http://h/", false},
		{"http://h:8080/", "http://h:8081/", false},
		{"https://h/", "https://h.evil.example/", false},
	} {
		ra, _ := http.NewRequest("GET", tc.a, nil)
		rb, _ := http.NewRequest("GET", tc.b, nil)
		if got := SameOriginRedirect(rb, []*http.Request{ra}) == nil; got != tc.same {
			t.Errorf("redirect %s → %s followed = %v, want %v", tc.a, tc.b, got, tc.same)
		}
	}
}
