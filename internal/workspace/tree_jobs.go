package workspace

// Sync commits the directory's entries to stable storage (fsync of the
// directory), so that a rename into it (WriteFileAtomic, Rename) survives
// a crash of the machine.
func (d *Dir) Sync() error { return d.h.sync() }
