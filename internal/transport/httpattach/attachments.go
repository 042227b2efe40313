package httpattach

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/maestro-run/maestro/internal/workspace"
)

const (
	// MaxAttachmentBytes bounds one uploaded attachment: the runtime's
	// default limit on an attachment a prompt names (10 MB).
	MaxAttachmentBytes = 10 << 20
	// AttachmentsDir is where uploads land, relative to the session's
	// workspace.
	AttachmentsDir = ".maestro-attachments"
)

// attachmentAnswer is the answer of POST …/attachments.
type attachmentAnswer struct {
	// Path is the file's path relative to the workspace: what a prompt's
	// attachments list names.
	Path  string `json:"path"`
	Bytes int64  `json:"bytes"`
}

// attachments serves POST …/attachments?name=FILE: the raw request body
// (at most MaxAttachmentBytes) is stored as AttachmentsDir/FILE inside the
// session's workspace (FILE-2, FILE-3… when taken), through
// internal/workspace so that nothing lands outside it, and the answer
// names the path a prompt's attachments take (docs/remote-attach.md,
// "Attachments"). Only the controller may upload: the subscriber header
// names a controller subscription, or the connection header the
// connection holding the lease.
func (h *Handler) attachments(w http.ResponseWriter, r *http.Request) {
	s, ok := h.readySession(w, r)
	if !ok {
		return
	}
	name := r.URL.Query().Get("name")
	if e := checkAttachmentName(name); e != nil {
		writeError(w, e)
		return
	}
	c, e := s.sender(r, false)
	if e != nil {
		writeError(w, e)
		return
	}
	if s.rt.ControllerID() != c.ID() {
		writeError(w, &Error{Status: http.StatusForbidden, Code: CodeAccessDenied, Message: "Only the controller may upload attachments"})
		return
	}
	data, ok := readLimited(w, r, MaxAttachmentBytes, fmt.Sprintf("Attachment exceeds %d MB", MaxAttachmentBytes>>20), "the attachment")
	if !ok {
		return
	}
	root, err := workspace.Open(s.rt.Snapshot().State.Cwd)
	if err != nil {
		writeError(w, asError(fmt.Errorf("open the session's workspace: %w", err), http.StatusInternalServerError))
		return
	}
	defer root.Close()
	rel, err := storeAttachment(root, name, data)
	if err != nil {
		status := http.StatusInternalServerError
		if _, ok := errors.AsType[*workspace.OutsideError](err); ok {
			status = http.StatusForbidden
		}
		writeError(w, &Error{Status: status, Code: codeOf(status, err.Error()), Message: err.Error()})
		return
	}
	writeJSON(w, http.StatusCreated, attachmentAnswer{Path: rel, Bytes: int64(len(data))})
}

// checkAttachmentName refuses a file name that is not one plain path
// element: empty, ".", "..", with a separator or a NUL, not UTF-8, or
// longer than 255 bytes.
func checkAttachmentName(name string) *Error {
	switch {
	case name == "":
		return badRequest("name: required, the attachment's file name")
	case name == "." || name == ".." || strings.ContainsAny(name, "/\\\x00") || !utf8.ValidString(name) || len(name) > 255:
		return badRequest("name: %q is not a plain file name (no directories, at most 255 bytes)", name)
	}
	return nil
}

// storeAttachment writes data as AttachmentsDir/name in root, or as
// name-2, name-3… (before the extension) when that file exists, and
// returns the path written, relative to root.
func storeAttachment(root *workspace.Root, name string, data []byte) (string, error) {
	ext := path.Ext(name)
	stem := strings.TrimSuffix(name, ext)
	for i := 1; i <= 1000; i++ {
		p := AttachmentsDir + "/" + name
		if i > 1 {
			p = fmt.Sprintf("%s/%s-%d%s", AttachmentsDir, stem, i, ext)
		}
		_, err := root.Lstat(p)
		if err == nil {
			continue
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("store attachment %s: %w", name, err)
		}
		if err := root.WriteFile(p, data, 0o644); err != nil {
			return "", fmt.Errorf("store attachment %s: %w", name, err)
		}
		return p, nil
	}
	return "", fmt.Errorf("store attachment %s: a thousand files of that name exist already", name)
}

// readLimited reads a request body of at most limit bytes; over it, it
// answers 413 with tooLarge, on another failure 400 naming what, and
// returns false.
func readLimited(w http.ResponseWriter, r *http.Request, limit int64, tooLarge, what string) ([]byte, bool) {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			writeError(w, &Error{Status: http.StatusRequestEntityTooLarge, Code: CodeBadRequest, Message: tooLarge})
			return nil, false
		}
		writeError(w, badRequest("Failed to read %s: %v", what, err))
		return nil, false
	}
	return data, true
}
