package blobstore

import "strconv"

// The keys of a data directory's files in an artifact store
// (docs/scale-out.md, "Artifacts"): the same relative paths as under the
// data directory.
//
//	uploads/<staging key>/<path>   files sent with a task's creation, until its job adopts them
//	uploads/<staging key>.job      the id of that job (as staging.JobFile)
//	tasks/<id>/work/…              the task's workspace: input/, output/, subtasks/
//	tasks/<id>/state/…             Maestro's state of its runs (logs/)
//	jobs/<id>/…                    the same for a job without a task

// UploadPrefix is the prefix of the files staged under key.
func UploadPrefix(key string) string { return "uploads/" + key }

// UploadJobKey is the object naming the job of the staging key.
func UploadJobKey(key string) string { return "uploads/" + key + ".job" }

// TaskPrefix is the prefix of task id's directory.
func TaskPrefix(id int64) string { return "tasks/" + strconv.FormatInt(id, 10) }
