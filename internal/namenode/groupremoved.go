package namenode

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// RemovedFromGroup reports whether the member whose Raft state is in dir
// (its group directory, DB.group) was removed from its group ('plasma admin
// namenode remove'), and the group's id: such a member refuses to start
// with this state, so whoever starts members ('plasma cluster up') leaves
// it out. No group directory (never started): not removed.
func RemovedFromGroup(dir string) (group string, removed bool, err error) {
	b, err := os.ReadFile(filepath.Join(dir, "group"))
	if errors.Is(err, os.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("namenode group: %w", err)
	}
	var gf groupFile
	if err := json.Unmarshal(b, &gf); err != nil {
		return "", false, fmt.Errorf("namenode group file %s: %w", filepath.Join(dir, "group"), err)
	}
	return gf.Group, gf.Removed, nil
}
