// Package pieces embeds Maestro's built-in piece definitions: one
// <name>.yaml file per piece at the root of [FS]. The files are validated
// and served by internal/piece; see docs/pieces.md for the schema.
package pieces

import (
	"embed"
	"io/fs"
)

//go:embed *.yaml
var files embed.FS

// FS returns the built-in piece files, read-only.
func FS() fs.FS { return files }
