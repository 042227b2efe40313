package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/maestro-run/maestro/internal/api"
	"github.com/maestro-run/maestro/internal/store"
)

// TestPieceVersions: on each store, saving a piece three times (PUT
// create, PUT, JSON PUT with if_version) keeps three versions,
// listed newest first without YAML and each readable with its YAML; a
// refused save adds none; a built-in has no history (404 saying so); bad
// version numbers are 400, unknown ones 404; deleting the piece deletes its
// history.
func TestPieceVersions(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, e *env) {
		v1 := pieceYAML("hist")
		v2 := strings.Replace(v1, "You answer.", "You answer briefly.", 1)
		v3 := strings.Replace(v2, "briefly", "in one line", 1)
		e.must(http.StatusCreated, "PUT", "/api/v1/pieces/hist", v1, nil)
		e.must(http.StatusOK, "PUT", "/api/v1/pieces/hist", v2, nil)
		e.wantError(http.StatusConflict, "PUT", "/api/v1/pieces/hist", map[string]any{"yaml": v3, "if_version": 1})
		e.wantError(http.StatusUnprocessableEntity, "PUT", "/api/v1/pieces/hist", strings.Replace(v3, "max_movements: 3", "max_movements: -1", 1))
		e.must(http.StatusOK, "PUT", "/api/v1/pieces/hist", map[string]any{"yaml": v3, "if_version": 2}, nil)

		var list api.PieceVersionList
		e.must(http.StatusOK, "GET", "/api/v1/pieces/hist/versions", nil, &list)
		if len(list.Versions) != 3 {
			t.Fatalf("versions %+v, want 3", list.Versions)
		}
		for i, want := range []int64{3, 2, 1} {
			v := list.Versions[i]
			if v.Name != "hist" || v.Version != want || v.YAML != "" || v.CreatedAt.IsZero() {
				t.Errorf("versions[%d] = %+v, want version %d without YAML", i, v, want)
			}
		}
		for _, tc := range []struct {
			path, yaml string
		}{{"1", v1}, {"2", v2}, {"3", v3}} {
			var v store.PieceVersion
			e.must(http.StatusOK, "GET", "/api/v1/pieces/hist/versions/"+tc.path, nil, &v)
			if v.Name != "hist" || v.YAML != tc.yaml {
				t.Errorf("version %s = %+v, want its YAML %q", tc.path, v, tc.yaml)
			}
		}

		for _, tc := range []struct {
			name, path string
			status     int
			says       string
		}{
			{"version to come", "/api/v1/pieces/hist/versions/4", http.StatusNotFound, "not found"},
			{"version zero", "/api/v1/pieces/hist/versions/0", http.StatusBadRequest, "version"},
			{"version not a number", "/api/v1/pieces/hist/versions/two", http.StatusBadRequest, "version"},
			{"unknown piece", "/api/v1/pieces/nope/versions", http.StatusNotFound, "not found"},
			{"built-in piece", "/api/v1/pieces/general/versions", http.StatusNotFound, "is not stored"},
		} {
			ae := e.wantError(tc.status, "GET", tc.path, nil)
			if !strings.Contains(ae.Error+ae.Field, tc.says) {
				t.Errorf("%s: %+v, want it to say %q", tc.name, ae, tc.says)
			}
		}

		e.must(http.StatusOK, "DELETE", "/api/v1/pieces/hist", nil, nil)
		e.wantError(http.StatusNotFound, "GET", "/api/v1/pieces/hist/versions", nil)
		e.wantError(http.StatusNotFound, "GET", "/api/v1/pieces/hist/versions/1", nil)
	})
}
