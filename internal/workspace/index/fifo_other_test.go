//go:build !unix

package index

import "errors"

func unixMkfifo(string) error { return errors.New("no FIFOs here") }
