package protocol

import (
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite docs/protocol/ from the Go types")

const schemaDir = "../../docs/protocol"

// TestSchemasUpToDate regenerates the schemas in memory and compares them
// with docs/protocol/. Run `go generate ./internal/protocol` (or this test
// with -update) after changing a wire type.
func TestSchemasUpToDate(t *testing.T) {
	files, err := SchemaFiles()
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		for name, data := range files {
			p := filepath.Join(schemaDir, filepath.FromSlash(name))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	onDisk := map[string]bool{}
	err = filepath.WalkDir(schemaDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".schema.json") {
			return err
		}
		rel, _ := filepath.Rel(schemaDir, p)
		rel = filepath.ToSlash(rel)
		if _, ok := files[rel]; !ok {
			if *update {
				return os.Remove(p)
			}
			t.Errorf("%s is no longer generated; run go generate ./internal/protocol", rel)
		}
		onDisk[rel] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range files {
		if !onDisk[name] {
			t.Errorf("%s is missing; run go generate ./internal/protocol", name)
			continue
		}
		got, err := os.ReadFile(filepath.Join(schemaDir, filepath.FromSlash(name)))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(string(want), string(got)); diff != "" {
			t.Errorf("%s is stale; run go generate ./internal/protocol (-generated +on disk):\n%s", name, diff)
		}
	}
}

func TestSchemaShape(t *testing.T) {
	t.Parallel()
	files, err := SchemaFiles()
	if err != nil {
		t.Fatal(err)
	}
	if n := len(files); n != 17+27+4+4 {
		t.Errorf("%d schema files", n)
	}
	hello := string(files["client/hello.schema.json"])
	for _, want := range []string{
		`"$schema": "https://json-schema.org/draft/2020-12/schema"`,
		`"const": "hello"`,
		`"additionalProperties": false`,
		`"uniqueItems": true`,
	} {
		if !strings.Contains(hello, want) {
			t.Errorf("hello schema lacks %s", want)
		}
	}
	ready := string(files["server/ready.schema.json"])
	if !strings.Contains(ready, "\"session_id\": {\n      \"type\": [\n        \"string\",\n        \"null\"\n      ]") {
		t.Errorf("ready.session_id is not string|null:\n%s", ready)
	}
}

// TestReadmeIndexesSchemas keeps docs/protocol/README.md's index complete.
func TestReadmeIndexesSchemas(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile(filepath.Join(schemaDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	files, err := SchemaFiles()
	if err != nil {
		t.Fatal(err)
	}
	for name := range files {
		if !strings.Contains(string(readme), "("+name+")") {
			t.Errorf("README.md does not link %s", name)
		}
	}
}
