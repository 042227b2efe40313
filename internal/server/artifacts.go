package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/maestro-run/maestro/internal/api"
	"github.com/maestro-run/maestro/internal/blobstore"
	"github.com/maestro-run/maestro/internal/httpedge"
	"github.com/maestro-run/maestro/internal/staging"
	"github.com/maestro-run/maestro/internal/workspace"
)

// The tasks' files in an artifact store (Config.Artifacts,
// docs/scale-out.md "Artifacts"): files sent with a task's creation are
// staged under blobstore.UploadPrefix, the files of PUT …/uploads/{path}
// go to the task's work/input/, and deliverables are read from the task's
// work/output/, which the workers sync there; so any serve answers for
// any worker. Without a store, the same routes use the data directory.

// stageInArtifacts moves the staging directory dir (written by
// stageFiles) to the artifact store under key, and removes dir. Without a
// store it does nothing. It answers the request and returns false on an
// error.
func (s *Server) stageInArtifacts(w http.ResponseWriter, r *http.Request, dir, key string) bool {
	a := s.cfg.Artifacts
	if a == nil {
		return true
	}
	defer os.RemoveAll(dir)
	d, err := workspace.OpenTrusted(dir)
	if err == nil {
		_, err = blobstore.SyncUp(r.Context(), a, d, blobstore.UploadPrefix(key), false)
		d.Close()
	}
	if err != nil {
		s.log.Error("stage uploads in the artifact store", "store", a.Location(), "key", key, "err", err)
		s.dropStaged(key)
		writeError(w, http.StatusServiceUnavailable, "cannot store the uploaded files in the artifact store; try again")
		return false
	}
	return true
}

// recordStagedJob writes the job file of staging key: the id of the job
// whose payload names it (staging.JobFile, or blobstore.UploadJobKey).
func (s *Server) recordStagedJob(r *http.Request, key string, jobID int64) {
	data := []byte(strconv.FormatInt(jobID, 10) + "\n")
	var err error
	if a := s.cfg.Artifacts; a != nil {
		err = blobstore.PutBytes(context.WithoutCancel(r.Context()), a, blobstore.UploadJobKey(key), data)
	} else {
		err = os.WriteFile(staging.JobFile(s.cfg.DataDir, key), data, 0o644)
	}
	if err != nil {
		s.log.Warn("upload staging: job file not written", "key", key, "job", jobID, "err", err)
	}
}

// dropStaged removes the files staged under key (the task was not
// created). A failure leaves them to the staging sweep.
func (s *Server) dropStaged(key string) {
	a := s.cfg.Artifacts
	if a == nil {
		os.RemoveAll(staging.Dir(s.cfg.DataDir, key))
		return
	}
	ctx := context.Background()
	objs, err := a.List(ctx, blobstore.UploadPrefix(key))
	for _, o := range objs {
		if err == nil {
			err = a.Delete(ctx, o.Key)
		}
	}
	if err != nil {
		s.log.Warn("upload staging: files of a task not created left to the sweep", "key", key, "err", err)
	}
}

// outputPrefix is the key prefix of task id's output/.
func outputPrefix(id int64) string {
	return blobstore.Join(blobstore.TaskPrefix(id), "work", "output")
}

// listArtifactDeliverables answers GET /tasks/{id}/deliverables from the
// artifact store: the objects under the task's output/, sorted by path,
// at most Config.MaxListEntries ("truncated": true beyond).
func (s *Server) listArtifactDeliverables(w http.ResponseWriter, r *http.Request, id int64) {
	prefix := outputPrefix(id)
	objs, err := s.cfg.Artifacts.List(r.Context(), prefix)
	if err != nil {
		s.log.Error("list deliverables in the artifact store", "task", id, "err", err)
		writeError(w, http.StatusServiceUnavailable, "cannot list the task's output in the artifact store; try again")
		return
	}
	resp := api.DeliverableList{Files: []api.Deliverable{}}
	for _, o := range objs {
		if len(resp.Files) == s.cfg.MaxListEntries {
			resp.Truncated = true
			break
		}
		resp.Files = append(resp.Files, api.Deliverable{Path: strings.TrimPrefix(o.Key, prefix+"/"), Size: o.Size, Modified: o.Modified.UTC()})
	}
	writeJSON(w, http.StatusOK, resp)
}

// getArtifactDeliverable answers GET /tasks/{id}/deliverables/{path}
// from the artifact store (ranges served as from a file).
func (s *Server) getArtifactDeliverable(w http.ResponseWriter, r *http.Request, id int64, p string) {
	rd, info, err := s.cfg.Artifacts.Get(r.Context(), blobstore.Join(outputPrefix(id), p))
	switch {
	case blobstore.IsNotExist(err):
		writeFieldError(w, http.StatusNotFound, "path", fmt.Sprintf("no deliverable %s; GET the deliverables list for the files", httpedge.Echo(p)))
		return
	case err != nil:
		s.log.Error("read a deliverable from the artifact store", "task", id, "path", p, "err", err)
		writeError(w, http.StatusServiceUnavailable, "cannot read the deliverable from the artifact store; try again")
		return
	}
	defer rd.Close()
	serveDeliverable(w, r, p, info.Modified, rd)
}

// uploadToArtifacts answers PUT /tasks/{id}/uploads/{path} with an
// artifact store: the body, at most Config.MaxUpload bytes, is spooled to
// a temporary file (its size and hash are needed before it is sent) and
// stored as the task's work/input/{path}; the task's next attempt
// materialises it.
func (s *Server) uploadToArtifacts(w http.ResponseWriter, r *http.Request, id int64, p string) {
	tmp, err := os.CreateTemp("", "maestro-upload-*")
	if err != nil {
		s.log.Error("create upload spool file", "task", id, "err", err)
		writeError(w, http.StatusInternalServerError, "internal error: cannot create the upload file")
		return
	}
	defer func() { tmp.Close(); os.Remove(tmp.Name()) }()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), http.MaxBytesReader(w, r.Body, s.cfg.MaxUpload))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("upload %s: expected at most %d bytes", p, s.cfg.MaxUpload))
			return
		}
		writeError(w, http.StatusBadRequest, fmt.Sprintf("upload %s: reading the body failed: %v", p, err))
		return
	}
	if _, err = tmp.Seek(0, io.SeekStart); err == nil {
		err = s.cfg.Artifacts.Put(r.Context(), blobstore.Join(blobstore.TaskPrefix(id), "work", "input", p), tmp, n, hex.EncodeToString(h.Sum(nil)))
	}
	if err != nil {
		s.log.Error("store upload in the artifact store", "task", id, "err", err)
		writeError(w, http.StatusServiceUnavailable, "cannot store the upload in the artifact store; try again")
		return
	}
	s.uploaded(w, r, id, p, n)
}
