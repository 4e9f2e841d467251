package auth

import (
	"fmt"
	"os"
	"path/filepath"
)

// fileData is one file for writeFilesDurably.
type fileData struct {
	name string
	data []byte
}

// writeFilesDurably writes files into dir in order, each durably before the
// next (a temporary file, fsynced, renamed into place, the directory
// fsynced), then fsyncs dir's parent, which may have just got dir's entry.
// A power cut leaves a prefix of the files, each complete or absent: put
// last the file whose presence says the set is complete.
func writeFilesDurably(dir string, mode os.FileMode, files ...fileData) error {
	for _, f := range files {
		path := filepath.Join(dir, f.name)
		tmp, err := os.CreateTemp(dir, "."+f.name+".tmp*")
		if err != nil {
			return err
		}
		_, err = tmp.Write(f.data)
		if err == nil {
			err = tmp.Chmod(mode)
		}
		if err == nil {
			err = tmp.Sync()
		}
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(tmp.Name(), path)
		}
		if err == nil {
			err = syncDir(dir)
		}
		if err != nil {
			os.Remove(tmp.Name())
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	return syncDir(filepath.Dir(filepath.Clean(dir)))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	return nil
}
