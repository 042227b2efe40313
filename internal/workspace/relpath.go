package workspace

import (
	"path"
	"strings"
)

// CheckSlashPath checks a slash-separated path that one side of a
// connection names inside a directory (a URL path segment, a listed
// deliverable): not empty, no NUL or backslash, not absolute, no ".."
// segment, naming something below the directory rather than the
// directory itself. It returns the cleaned path, or the rule the path
// breaks as a phrase ("without .. segments") for the caller's message.
// Checking the text is not confinement: open the result through a Root.
func CheckSlashPath(p string) (clean, broken string) {
	switch {
	case p == "":
		return "", "not empty"
	case strings.ContainsAny(p, "\x00\\"):
		return "", "without NUL or backslash"
	case strings.HasPrefix(p, "/"):
		return "", "not an absolute path"
	}
	for seg := range strings.SplitSeq(p, "/") {
		if seg == ".." {
			return "", "without .. segments"
		}
	}
	c := path.Clean(p)
	if c == "." {
		return "", "naming a file"
	}
	return c, ""
}
