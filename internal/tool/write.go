package tool

import (
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

// NewWrite returns the Write tool: create or replace one file of root,
// with the default limits.
func NewWrite(root *workspace.Root) Tool { return NewWriteWith(root, FileLimits{}) }

// NewWriteWith returns the Write tool with the given limits: content over
// lim.MaxFileBytes is refused before anything is written.
func NewWriteWith(root *workspace.Root, lim FileLimits) Tool {
	return fileChanger("Write", writeDescription, root, lim, writeFile)
}

func writeFile(root *workspace.Root, in WriteInput, maxBytes int64) Result {
	if in.Path == "" {
		return Failf(CodeInvalidInput, "path is required")
	}
	shown := workspace.Excerpt(in.Path)
	if int64(len(in.Content)) > maxBytes {
		return Failf(CodeTooLarge, "content is %d bytes, over the %s limit for Write; write a smaller file", len(in.Content), sizeText(maxBytes))
	}
	verb := "overwrote"
	switch fi, err := root.Stat(in.Path); {
	case err == nil && fi.IsDir():
		return Failf(CodeInvalidInput, "%s is a directory; give a file path", shown)
	case err == nil && !fi.Mode().IsRegular():
		return fileErrorResult(in.Path, &workspace.NotRegularError{Path: in.Path, Mode: fi.Mode()})
	case errors.Is(err, fs.ErrNotExist):
		verb = "created"
	case err != nil:
		return fileErrorResult(in.Path, err)
	}
	if err := root.WriteFile(in.Path, []byte(in.Content), 0o644); err != nil {
		return fileErrorResult(in.Path, err)
	}
	return Result{Content: fmt.Sprintf("%s %s (%d bytes)", verb, shown, len(in.Content))}
}
