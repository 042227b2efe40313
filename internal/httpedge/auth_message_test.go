package httpedge

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A 401 says why: a server that requires a token but has none configured
// says so, instead of asking a client that sent one to send one (issue 15
// item 10).
func TestUnauthorizedSaysWhy(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		p       *Policy
		surface Surface
		token   string
		want    string
	}{
		{"no token configured, one sent", &Policy{RequireAuth: true}, REST, "anything", "has none configured"},
		{"no token configured, none sent", &Policy{RequireAuth: true}, Headless, "", "has none configured"},
		{"wrong token (REST)", &Policy{Token: "s3cret", RequireAuth: true}, REST, "wrong", MsgUnauthorizedREST},
		{"wrong token (headless)", &Policy{Token: "s3cret", RequireAuth: true}, Headless, "wrong", MsgUnauthorizedHeadless},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.p.Surface = func(*http.Request) Surface { return tc.surface }
			r := httptest.NewRequest("GET", "/", nil)
			if tc.token != "" {
				r.Header.Set("Authorization", "Bearer "+tc.token)
			}
			e := tc.p.Authorize(r)
			if e == nil || !strings.Contains(e.Message, tc.want) {
				t.Errorf("Authorize = %+v, want a 401 saying %q", e, tc.want)
			}
		})
	}
}
