package queue

import (
	"context"
	"fmt"
	"io/fs"
	"testing/fstest"

	"github.com/maestro-run/maestro/internal/engine"
	"github.com/maestro-run/maestro/internal/piece"
	"github.com/maestro-run/maestro/internal/store"
	"github.com/maestro-run/maestro/pieces"
)

// StoreLibrary loads the piece library a job runs with: Maestro's built-in
// pieces, overridden by the pieces stored at runtime (store Pieces), then
// by the override directories dirs (lowest precedence first). A stored
// piece that does not validate is left out (the API refuses to store
// one; this guards against rows edited around it).
func StoreLibrary(ctx context.Context, st store.Pieces, dirs ...string) (*engine.Library, error) {
	fsys := fstest.MapFS{}
	err := fs.WalkDir(pieces.FS(), ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(pieces.FS(), path)
		if err != nil {
			return err
		}
		fsys[path] = &fstest.MapFile{Data: data, Mode: 0o444}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the built-in pieces: %w", err)
	}
	stored, err := st.ListPieces(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the stored pieces: %w", err)
	}
	for _, p := range stored {
		// The built-ins are loaded strictly; a stored piece that does not
		// validate (edited around the API) must not take them down.
		if _, err := piece.Parse(p.Name+".yaml", []byte(p.YAML)); err != nil {
			continue
		}
		fsys[p.Name+".yaml"] = &fstest.MapFile{Data: []byte(p.YAML), Mode: 0o444}
	}
	return engine.NewLibraryFS(ctx, fsys, dirs, "")
}
