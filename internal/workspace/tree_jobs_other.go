//go:build !linux

package workspace

func (h dirHandle) sync() error {
	f, err := h.root.Open(".")
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
