package tool

import (
	"errors"
	"fmt"
	"strings"

	"github.com/maestro-run/maestro/internal/workspace"
)

// EditInput is the input of the Edit tool.
type EditInput struct {
	Path       string `json:"path" jsonschema:"file to edit, relative to the workspace root"`
	OldString  string `json:"old_string" jsonschema:"exact text to replace; must occur exactly once unless replace_all is set"`
	NewString  string `json:"new_string" jsonschema:"replacement text"`
	ReplaceAll bool   `json:"replace_all,omitempty" jsonschema:"replace every occurrence instead of exactly one"`
}

const editDescription = `Replace exact text in a file of the workspace. old_string must match the file ` +
	`character for character (including indentation) and occur exactly once, unless replace_all is set; ` +
	`include surrounding lines to make it unique. Read the file first.`

// maxReportedLines bounds the line numbers listed in an Edit result.
const maxReportedLines = 10

// NewEdit returns the Edit tool: exact string replacement in one file of
// root, with the default limits.
func NewEdit(root *workspace.Root) Tool { return NewEditWith(root, FileLimits{}) }

// NewEditWith returns the Edit tool with the given limits: a file over
// lim.MaxFileBytes is refused without being read, and so is an edit that
// would make the file larger than that.
func NewEditWith(root *workspace.Root, lim FileLimits) Tool {
	return fileChanger("Edit", editDescription, root, lim, editFile)
}

func editFile(root *workspace.Root, in EditInput, maxBytes int64) Result {
	switch {
	case in.Path == "":
		return Failf(CodeInvalidInput, "path is required")
	case in.OldString == "":
		return Failf(CodeInvalidInput, "old_string is empty; give the exact text to replace (use Write to create a file)")
	case in.OldString == in.NewString:
		return Failf(CodeInvalidInput, "old_string and new_string are identical; nothing to change")
	}
	shown := workspace.Excerpt(in.Path)
	data, err := root.ReadFileMax(in.Path, maxBytes)
	var tooLarge *workspace.TooLargeError
	switch {
	case isDirError(err):
		return Failf(CodeInvalidInput, "%s is a directory, not a file", shown)
	case errors.As(err, &tooLarge):
		return Failf(CodeTooLarge, "%s is %d bytes, over the %s limit for Edit; change it with Bash (for example sed) or split it",
			shown, tooLarge.Size, sizeText(maxBytes))
	case err != nil:
		return fileErrorResult(in.Path, err)
	}
	content := string(data)
	oldS, newS := in.OldString, in.NewString
	n := strings.Count(content, oldS)
	if n == 0 && strings.Contains(content, "\r\n") && strings.Contains(oldS, "\n") && !strings.Contains(oldS, "\r\n") {
		// The file has CRLF line ends that the model did not reproduce.
		oldS = strings.ReplaceAll(oldS, "\n", "\r\n")
		newS = strings.ReplaceAll(newS, "\r\n", "\n")
		newS = strings.ReplaceAll(newS, "\n", "\r\n")
		n = strings.Count(content, oldS)
	}
	switch {
	case n == 0:
		return Failf(CodeNotFound, "old_string not found in %s", shown)
	case n > 1 && !in.ReplaceAll:
		return Failf(CodeInvalidInput, "old_string occurs %d times in %s; add context to make it unique or set replace_all", n, shown)
	}
	if size := int64(len(content)) + int64(n)*(int64(len(newS))-int64(len(oldS))); size > maxBytes {
		return Failf(CodeTooLarge, "the edit would make %s %d bytes, over the %s limit for Edit", shown, size, sizeText(maxBytes))
	}
	lines := replacementLines(content, oldS, newS, n)
	updated := strings.ReplaceAll(content, oldS, newS)
	if err := root.WriteFile(in.Path, []byte(updated), 0o644); err != nil {
		return fileErrorResult(in.Path, err)
	}
	noun := "occurrence"
	if n > 1 {
		noun = "occurrences"
	}
	return Result{Content: fmt.Sprintf("edited %s: replaced %d %s (%s)", shown, n, noun, lines)}
}

// replacementLines describes where the replacements start in the edited
// file: "line 12" or "lines 3, 40, 77".
func replacementLines(content, oldS, newS string, n int) string {
	var nums []string
	line, shift, pos := 1, 0, 0
	for i := 0; i < n && i < maxReportedLines; i++ {
		j := strings.Index(content[pos:], oldS)
		line += strings.Count(content[pos:pos+j], "\n")
		nums = append(nums, fmt.Sprint(line+shift))
		// Lines added or removed by earlier replacements move later ones.
		shift += strings.Count(newS, "\n") - strings.Count(oldS, "\n")
		line += strings.Count(oldS, "\n")
		pos += j + len(oldS)
	}
	s := "line " + nums[0]
	if len(nums) > 1 {
		s = "lines " + strings.Join(nums, ", ")
	}
	if n > maxReportedLines {
		s += ", …"
	}
	return s
}
