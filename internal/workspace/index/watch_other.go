//go:build !linux

package index

import "errors"

// newWatcher: without inotify the index lists the tree on every Read.
func newWatcher() (watcher, error) {
	return nil, errors.New("file-system notifications are not supported on this system")
}
