package tool

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"github.com/maestro-run/maestro/internal/workspace"
)

// WriteInput is the input of the Write tool.
type WriteInput struct {
	Path    string `json:"path" jsonschema:"file to write, relative to the workspace root"`
	Content string `json:"content" jsonschema:"the complete new content of the file"`
}

const writeDescription = `Write a file of the workspace, replacing it entirely if it exists ` +
	`(missing parent directories are created). Prefer Edit for changing part of an existing file.`

// NewWrite returns the Write tool: create or replace one file of root.
func NewWrite(root *workspace.Root) Tool {
	return New("Write", writeDescription, false, func(ctx context.Context, in WriteInput, _ Call) (Result, error) {
		if err := ctx.Err(); err != nil {
			return Result{}, err
		}
		return writeFile(root, in), nil
	})
}

func writeFile(root *workspace.Root, in WriteInput) Result {
	if in.Path == "" {
		return Errorf("path is required")
	}
	verb := "overwrote"
	switch fi, err := root.Stat(in.Path); {
	case err == nil && fi.IsDir():
		return Errorf("%s is a directory; give a file path", in.Path)
	case errors.Is(err, fs.ErrNotExist):
		verb = "created"
	case err != nil:
		return fileErrorResult(in.Path, err)
	}
	if err := root.WriteFile(in.Path, []byte(in.Content), 0o644); err != nil {
		return fileErrorResult(in.Path, err)
	}
	return Result{Content: fmt.Sprintf("%s %s (%d bytes)", verb, in.Path, len(in.Content))}
}
