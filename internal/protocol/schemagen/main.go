// Command schemagen writes the headless protocol's JSON Schemas (see
// protocol.SchemaFiles) into a directory, removing schema files that are no
// longer generated. It runs from go generate in internal/protocol:
//
//	go generate ./internal/protocol
package main

import (
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/maestro-run/maestro/internal/protocol"
)

func main() {
	dir := flag.String("dir", "../../docs/protocol", "output directory")
	flag.Parse()
	if err := run(*dir); err != nil {
		fmt.Fprintln(os.Stderr, "schemagen:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	files, err := protocol.SchemaFiles()
	if err != nil {
		return err
	}
	for name, data := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("create directory for %s: %w", name, err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
	}
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".schema.json") {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		if _, ok := files[filepath.ToSlash(rel)]; !ok {
			if err := os.Remove(p); err != nil {
				return fmt.Errorf("remove stale %s: %w", rel, err)
			}
		}
		return nil
	})
}
