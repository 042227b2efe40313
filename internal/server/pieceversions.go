package server

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/maestro-run/maestro/internal/api"
	"github.com/maestro-run/maestro/internal/store"
)

// The history of a stored piece (issue 18): every version a create or an
// update wrote, for the studio's diff against any earlier version.

// listPieceVersions answers GET /api/v1/pieces/{name}/versions.
func (s *Server) listPieceVersions(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	list, err := s.st.PieceVersions(r.Context(), name)
	if err != nil {
		s.pieceVersionError(w, r, name, err)
		return
	}
	writeJSON(w, http.StatusOK, api.PieceVersionList{Versions: list})
}

// getPieceVersion answers GET /api/v1/pieces/{name}/versions/{version}.
func (s *Server) getPieceVersion(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	version, ok := pathID(w, r, "version")
	if !ok {
		return
	}
	v, err := s.st.GetPieceVersion(r.Context(), name, version)
	if err != nil {
		s.pieceVersionError(w, r, name, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// pieceVersionError answers a store error of the history routes; a piece
// of the catalog that is not stored has no history, and the 404 says so.
func (s *Server) pieceVersionError(w http.ResponseWriter, r *http.Request, name string, err error) {
	if errors.Is(err, store.ErrNotFound) {
		if _, inCatalog := s.cfg.Pieces.Get(name); inCatalog {
			if _, serr := s.st.GetPiece(r.Context(), name); errors.Is(serr, store.ErrNotFound) {
				writeError(w, http.StatusNotFound, fmt.Sprintf("piece %q is not stored (it comes from the catalog): only pieces created or changed through the API have versions", name))
				return
			}
		}
	}
	s.storeError(w, r, err)
}
