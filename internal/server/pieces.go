package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strings"

	"github.com/maestro-run/maestro/internal/api"
	"github.com/maestro-run/maestro/internal/httpedge"
	"github.com/maestro-run/maestro/internal/piece"
	"github.com/maestro-run/maestro/internal/store"
)

// builtinSummary describes a catalog piece: a built-in, or a file of an
// override directory (source "file").
func (s *Server) builtinSummary(e piece.Entry) api.PieceSummary {
	sum := api.PieceSummary{Name: e.Piece.Name, Description: e.Piece.Description, Source: api.SourceBuiltin, Builtin: e.Builtin,
		Deletable: false, Movements: e.Piece.MovementNames()}
	if !strings.HasPrefix(e.Source, "builtin:") {
		sum.Source, sum.File = api.SourceFile, e.Source
	}
	return sum
}

func (s *Server) storedDetail(p store.Piece) api.PieceDetail {
	e, inCatalog := s.cfg.Pieces.Get(p.Name)
	builtin := inCatalog && e.Builtin
	d := api.PieceDetail{
		PieceSummary: api.PieceSummary{Name: p.Name, Source: api.SourceStore, Builtin: builtin, Version: p.Version,
			Deletable: !piece.Undeletable(p.Name)},
		YAML: p.YAML,
	}
	parsed, err := piece.Parse(p.Name+".yaml", []byte(p.YAML))
	if err != nil {
		d.Error = err.Error()
		return d
	}
	d.Description, d.Movements, d.Piece = parsed.Description, parsed.MovementNames(), parsed
	return d
}

// pieceExists reports whether name is a built-in or stored piece.
func (s *Server) pieceExists(ctx context.Context, name string) (bool, error) {
	if _, ok := s.cfg.Pieces.Get(name); ok {
		return true, nil
	}
	_, err := s.st.GetPiece(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

func (s *Server) listPieces(w http.ResponseWriter, r *http.Request) {
	stored, err := s.st.ListPieces(r.Context())
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	servers, err := s.mcpServerNames(r.Context())
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	byName := map[string]api.PieceSummary{}
	for _, e := range s.cfg.Pieces.List() {
		byName[e.Piece.Name] = withMissingTools(s.builtinSummary(e), e.Piece, servers)
	}
	for _, p := range stored {
		d := s.storedDetail(p)
		byName[p.Name] = withMissingTools(d.PieceSummary, d.Piece, servers)
	}
	out := make([]api.PieceSummary, 0, len(byName))
	for _, v := range byName {
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b api.PieceSummary) int { return strings.Compare(a.Name, b.Name) })
	writeJSON(w, http.StatusOK, api.PieceList{Pieces: out})
}

// mcpServerNames lists the MCP servers a piece's tools may name: the
// configuration's and the registered ones.
func (s *Server) mcpServerNames(ctx context.Context) ([]string, error) {
	recs, err := s.st.ListMCPServers(ctx)
	if err != nil {
		return nil, fmt.Errorf("list MCP servers: %w", err)
	}
	out := slices.Clone(s.cfg.MCPServerNames)
	for _, r := range recs {
		out = append(out, r.Slug)
	}
	return out, nil
}

// withMissingTools sets sum's MissingTools: the tools p's movements name
// that a run with servers lacks, and the required MCP servers it lacks.
func withMissingTools(sum api.PieceSummary, p *piece.Piece, servers []string) api.PieceSummary {
	if p == nil {
		return sum
	}
	sum.MissingTools = p.MissingTools(servers)
	for _, slug := range p.MissingMCP(servers) {
		sum.MissingTools = append(sum.MissingTools, "required_mcp "+slug)
	}
	return sum
}

func (s *Server) getPiece(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	p, err := s.st.GetPiece(r.Context(), name)
	if err == nil {
		writeJSON(w, http.StatusOK, s.storedDetail(p))
		return
	}
	if !errors.Is(err, store.ErrNotFound) {
		s.storeError(w, r, err)
		return
	}
	e, ok := s.cfg.Pieces.Get(name)
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no piece %q; GET /api/v1/pieces lists them", name))
		return
	}
	y, err := piece.Marshal(e.Piece)
	if err != nil {
		s.log.Error("marshal built-in piece", "name", name, "err", err)
		writeError(w, http.StatusInternalServerError, "internal error: cannot encode the piece")
		return
	}
	writeJSON(w, http.StatusOK, api.PieceDetail{PieceSummary: s.builtinSummary(e), YAML: string(y), Piece: e.Piece})
}

// readPiece reads a piece from the request: the body is the YAML itself,
// or, with Content-Type application/json, {"yaml": "...", "if_version": n}.
func readPiece(w http.ResponseWriter, r *http.Request) (yaml string, ifVersion int64, ok bool) {
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if ct == "application/json" {
		var req api.PieceRequest
		if !decodeJSON(w, r, &req, false) {
			return "", 0, false
		}
		if req.YAML == "" {
			writeFieldError(w, http.StatusUnprocessableEntity, "yaml", "required: the piece as YAML")
			return "", 0, false
		}
		return req.YAML, req.IfVersion, true
	}
	if ct != "" && httpedge.SimpleContentType(r) {
		// A browser sends text/plain and form bodies cross-site without a
		// CORS preflight; YAML comes with no type or a YAML type.
		writeError(w, http.StatusUnsupportedMediaType, fmt.Sprintf("Content-Type %s: expected application/yaml (or no Content-Type) for a piece's YAML, or application/json", httpedge.Echo(ct)))
		return "", 0, false
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, store.MaxPieceBytes))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("piece: expected at most %d bytes of YAML", store.MaxPieceBytes))
			return "", 0, false
		}
		writeError(w, http.StatusBadRequest, "reading the request body failed: "+err.Error())
		return "", 0, false
	}
	if len(data) == 0 {
		writeError(w, http.StatusUnprocessableEntity, "expected the piece's YAML as the request body, found nothing")
		return "", 0, false
	}
	return string(data), 0, true
}

// parseNamed validates src and checks it declares name (when name is not
// empty). It answers 422 and returns nil on failure.
func parseNamed(w http.ResponseWriter, name, src string) *piece.Piece {
	file := name
	if file == "" {
		file = "piece"
	}
	p, err := piece.Parse(file+".yaml", []byte(src))
	if err != nil {
		if !pieceErrors(w, err) {
			writeError(w, http.StatusUnprocessableEntity, err.Error())
		}
		return nil
	}
	if name != "" && p.Name != name {
		pieceErrors(w, &piece.Errors{List: []piece.Error{{File: file + ".yaml", Line: p.NamePos.Line, Col: p.NamePos.Col, Field: "name",
			Message: fmt.Sprintf("expected %q, the name in the URL, found %q", name, p.Name)}}})
		return nil
	}
	return p
}

// readValidPiece reads a piece from the request (readPiece) and validates
// it (parseNamed); it answers the request and returns a nil piece when the
// piece is unreadable or invalid.
func readValidPiece(w http.ResponseWriter, r *http.Request, name string) (src string, ifVersion int64, p *piece.Piece) {
	src, ifVersion, ok := readPiece(w, r)
	if !ok {
		return "", 0, nil
	}
	return src, ifVersion, parseNamed(w, name, src)
}

func (s *Server) validatePiece(w http.ResponseWriter, r *http.Request) {
	_, _, p := readValidPiece(w, r, "")
	if p == nil {
		return
	}
	writeJSON(w, http.StatusOK, api.PieceValidation{Valid: true, Piece: p})
}

func (s *Server) createPiece(w http.ResponseWriter, r *http.Request) {
	src, ifVersion, p := readValidPiece(w, r, "")
	if p == nil {
		return
	}
	if ifVersion != 0 {
		writeFieldError(w, http.StatusUnprocessableEntity, "if_version", fmt.Sprintf("only with PUT /api/v1/pieces/%s, which replaces the piece only at that version; POST creates a piece", p.Name))
		return
	}
	if _, exists := s.cfg.Pieces.Get(p.Name); exists {
		writeFieldError(w, http.StatusConflict, "name", fmt.Sprintf("%q is a built-in piece (or a piece file); override it with PUT /api/v1/pieces/%s", p.Name, p.Name))
		return
	}
	stored, err := s.st.CreatePiece(r.Context(), p.Name, src)
	if errors.Is(err, store.ErrConflict) {
		writeFieldError(w, http.StatusConflict, "name", fmt.Sprintf("a piece %q exists already; replace it with PUT /api/v1/pieces/%s", p.Name, p.Name))
		return
	}
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	s.audit(r, api.ActionPieceCreate, pieceTarget(p.Name), api.PieceAudit{Version: stored.Version})
	w.Header().Set("Location", api.PiecesPath+"/"+p.Name)
	writeJSON(w, http.StatusCreated, s.storedDetail(stored))
}

// putPiece creates or replaces a stored piece (a stored piece named like a
// built-in overrides it). An invalid piece changes nothing.
func (s *Server) putPiece(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if err := store.ValidateName("name", name); err != nil {
		s.storeError(w, r, err)
		return
	}
	src, ifVersion, p := readValidPiece(w, r, name)
	if p == nil {
		return
	}
	_, err := s.st.GetPiece(r.Context(), name)
	switch {
	case err == nil:
		stored, err := s.st.UpdatePiece(r.Context(), name, src, ifVersion)
		if errors.Is(err, store.ErrConflict) {
			writeFieldError(w, http.StatusConflict, "if_version", fmt.Sprintf("piece %q is no longer at version %d; GET it and apply the change again", name, ifVersion))
			return
		}
		if err != nil {
			s.storeError(w, r, err)
			return
		}
		s.audit(r, api.ActionPieceUpdate, pieceTarget(name), api.PieceAudit{Version: stored.Version})
		writeJSON(w, http.StatusOK, s.storedDetail(stored))
	case errors.Is(err, store.ErrNotFound):
		if ifVersion > 0 {
			writeFieldError(w, http.StatusConflict, "if_version", fmt.Sprintf("piece %q is not stored, so it has no version %d", name, ifVersion))
			return
		}
		stored, err := s.st.CreatePiece(r.Context(), name, src)
		if err != nil {
			s.storeError(w, r, err)
			return
		}
		s.audit(r, api.ActionPieceCreate, pieceTarget(name), api.PieceAudit{Version: stored.Version})
		writeJSON(w, http.StatusCreated, s.storedDetail(stored))
	default:
		s.storeError(w, r, err)
	}
}

func (s *Server) deletePiece(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	ifVersion, ok := queryInt(w, r, "version")
	if !ok {
		return
	}
	if piece.Undeletable(name) {
		writeError(w, http.StatusConflict, fmt.Sprintf("piece %q is built in and cannot be deleted: Maestro relies on it (general is the classifier's fallback, chat answers conversations); change it with PUT instead", name))
		return
	}
	entry, inCatalog := s.cfg.Pieces.Get(name)
	err := s.st.DeletePiece(r.Context(), name, ifVersion)
	switch {
	case err == nil:
		s.audit(r, api.ActionPieceDelete, pieceTarget(name), api.PieceDeleteAudit{BuiltinRestored: inCatalog})
		writeJSON(w, http.StatusOK, api.PieceDeleted{Deleted: name, BuiltinRestored: inCatalog})
	case errors.Is(err, store.ErrConflict):
		writeFieldError(w, http.StatusConflict, "version", fmt.Sprintf("piece %q is no longer at version %d; GET it and decide again", name, ifVersion))
	case errors.Is(err, store.ErrNotFound) && inCatalog && !strings.HasPrefix(entry.Source, "builtin:"):
		writeError(w, http.StatusConflict, fmt.Sprintf("piece %q comes from the file %s, not from the API; remove the file to delete it", name, entry.Source))
	case errors.Is(err, store.ErrNotFound) && inCatalog:
		writeError(w, http.StatusConflict, fmt.Sprintf("piece %q is built in and cannot be deleted; PUT a replacement to override it", name))
	case errors.Is(err, store.ErrNotFound):
		writeError(w, http.StatusNotFound, fmt.Sprintf("no piece %q; GET /api/v1/pieces lists them", name))
	default:
		s.storeError(w, r, err)
	}
}
