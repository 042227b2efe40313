// Package staging is the layout of the upload staging area, shared by the
// API that writes it (internal/server) and the queue that empties it
// (internal/queue): files sent with a task's creation wait in
// <dataDir>/uploads/<key>/ until the task's job moves them into its
// input/; once the task and its job exist, <dataDir>/uploads/<key>.job
// holds the job's id.
package staging

import (
	"io/fs"
	"path/filepath"
)

// PayloadField is the job payload field naming the staging directory of
// a job's files. The server sets it; a client's payload may not.
const PayloadField = "input_staging"

// JobSuffix ends the name of a staging directory's job file.
const JobSuffix = ".job"

// Perm is the mode of a staging directory (and of uploads/ when it is
// created with it): the files a client sent are not for other local users
// to read, whatever the data directory's mode.
const Perm fs.FileMode = 0o700

// Dir is the staging directory key: <dataDir>/uploads/<key>.
func Dir(dataDir, key string) string { return filepath.Join(dataDir, "uploads", key) }

// JobFile is the file naming the job of the staging directory key, its id
// in decimal: <dataDir>/uploads/<key>.job.
func JobFile(dataDir, key string) string { return Dir(dataDir, key) + JobSuffix }

// ValidKey reports whether key can name a staging directory: 32 lowercase
// hexadecimal digits.
func ValidKey(key string) bool {
	if len(key) != 32 {
		return false
	}
	for _, c := range key {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
