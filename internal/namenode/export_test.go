package namenode

// SetFsckPageWork makes fsck pages small (call before starting namenodes)
// and returns a function that restores the default.
func SetFsckPageWork(w int) (restore func()) {
	old := fsckPageWork
	fsckPageWork = w
	return func() { fsckPageWork = old }
}
