package vfs

// Writers returns how many handles of this VFS have regular file ino open
// for writing. While one is open, a write of the file may be on its way
// from a frontend's cache (the kernel's page cache copies a write(2) into
// its pages before it sends it), so a frontend must not drop those pages
// then (see internal/fusefs, pagecache.go). A handle counts from Open (or
// Create) to Release.
func (v *VFS) Writers(ino uint64) int {
	v.hmu.Lock()
	defer v.hmu.Unlock()
	if st := v.states[ino]; st != nil {
		return st.writers
	}
	return 0
}
