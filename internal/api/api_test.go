package api_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/maestro-run/maestro/internal/api"
	"github.com/maestro-run/maestro/internal/httpedge"
)

// TestErrorIsTheEdgeEnvelope: what the one error writer of the HTTP edge
// writes for the REST surface is an api.Error, field for field (a field
// the type lacks would fail the strict decode).
func TestErrorIsTheEdgeEnvelope(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   httpedge.Error
		want api.Error
	}{
		{httpedge.Error{Status: http.StatusNotFound, Message: "no task 9"}, api.Error{Error: "no task 9"}},
		{httpedge.Error{Status: http.StatusUnprocessableEntity, Message: "title: required", Field: "title", Code: "ignored"}, api.Error{Error: "title: required", Field: "title"}},
		{httpedge.Error{Status: http.StatusUnauthorized, Message: httpedge.MsgUnauthorizedREST}, api.Error{Error: httpedge.MsgUnauthorizedREST}},
	} {
		rec := httptest.NewRecorder()
		httpedge.WriteError(rec, httpedge.REST, &tc.in)
		dec := json.NewDecoder(rec.Body)
		dec.DisallowUnknownFields()
		var got api.Error
		if err := dec.Decode(&got); err != nil {
			t.Fatalf("%d: the edge's body is not an api.Error: %v", tc.in.Status, err)
		}
		if got.Error != tc.want.Error || got.Field != tc.want.Field || got.Errors != nil || rec.Code != tc.in.Status {
			t.Errorf("%d: got %d %+v, want %+v", tc.in.Status, rec.Code, got, tc.want)
		}
	}
}
