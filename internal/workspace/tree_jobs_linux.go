package workspace

func (h dirHandle) sync() error { return h.f.Sync() }
