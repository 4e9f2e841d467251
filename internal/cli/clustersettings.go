package cli

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/plasmafs/plasma/internal/clientconf"
	"github.com/plasmafs/plasma/internal/loopback"
)

// clusterSettingsFile, in a cluster directory, records the settings the
// cluster was made with, so that a later 'cluster up' brings the same
// cluster back: the same addresses (the client configuration stays
// valid), security levels, volume size and the rest. A flag given to a
// later 'cluster up' changes a setting, and the change is recorded.
const clusterSettingsFile = "settings.json"

// clusterSettings are the recorded settings of a 'cluster up' cluster.
type clusterSettings struct {
	Cluster         string   `json:"cluster"`
	Datanodes       int      `json:"datanodes"`
	Blocksize       int64    `json:"blocksize"`
	VolumeSize      int64    `json:"volume_size"`
	NamenodeAddr    string   `json:"namenode_addr"`
	DatanodeAddrs   []string `json:"datanode_addrs"`
	TaskServerAddrs []string `json:"taskserver_addrs,omitempty"`
	TaskServerSlots int      `json:"taskserver_slots"`
	Security        string   `json:"security"`
	DataSecurity    string   `json:"data_security"`
	Relaxed         bool     `json:"relaxed"`
	Store           string   `json:"store,omitempty"` // metadata store: sqlite ("") or postgres
	// AdminAddrs are the members' admin ports (/metrics, status page), by
	// member name (namenode, dn1, ts1, mount).
	AdminAddrs map[string]string `json:"admin_addrs,omitempty"`
	// WebHDFSAddr is where the WebHDFS gateway listens ("": no gateway).
	WebHDFSAddr string `json:"webhdfs_addr,omitempty"`
	// Namenodes > 1: a replicated namenode group (clustergroup.go) whose
	// members serve clients at GroupAddrs (nn1 first).
	Namenodes  int      `json:"namenodes,omitempty"`
	GroupAddrs []string `json:"namenode_group_addrs,omitempty"`
}

// loadClusterSettings returns the settings recorded in dir; for a cluster
// made by an older version, which recorded none, what its files tell
// (name, addresses and security levels from its client configuration,
// datanodes, blocksize and volume size from its volumes). found is false
// for a directory that holds no cluster yet.
func loadClusterSettings(dir string) (s clusterSettings, found bool, err error) {
	p := filepath.Join(dir, clusterSettingsFile)
	b, err := os.ReadFile(p)
	if err == nil {
		if err := json.Unmarshal(b, &s); err != nil {
			return s, false, fmt.Errorf("%s: %w (remove it to take the settings from the flags)", p, err)
		}
		return s, true, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return s, false, err
	}
	b, err = os.ReadFile(filepath.Join(dir, "client.conf"))
	if err != nil {
		return s, false, nil // nothing recorded: a new cluster
	}
	es, err := clientconf.Parse(string(b))
	if err != nil || len(es) != 1 || len(es[0].Namenodes) == 0 {
		return s, false, nil
	}
	e := es[0]
	s = clusterSettings{Cluster: e.Name, NamenodeAddr: e.Namenodes[0], Security: e.Security, DataSecurity: e.DataSecurity,
		TaskServerAddrs: e.TaskServers, TaskServerSlots: -1}
	for {
		var v struct {
			Blocksize int64 `json:"blocksize"`
			Blocks    int64 `json:"blocks"`
		}
		b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("dn%d", s.Datanodes+1), "config"))
		if err != nil || json.Unmarshal(b, &v) != nil {
			break
		}
		if s.Datanodes == 0 {
			s.Blocksize, s.VolumeSize = v.Blocksize, v.Blocksize*v.Blocks
		}
		s.Datanodes++
	}
	return s, true, nil
}

// save records the settings in dir.
func (s clusterSettings) save(dir string) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return writePrivate(filepath.Join(dir, clusterSettingsFile), append(b, '\n'))
}

// keptAddrs returns n listening addresses: the recorded ones that are
// free, and new free ports for the others (and beyond the record).
func keptAddrs(recorded []string, n int) ([]string, error) {
	out := make([]string, n)
	for i := range out {
		if i < len(recorded) && loopback.Claim(recorded[i]) {
			out[i] = recorded[i]
			continue
		}
		a, err := freePort()
		if err != nil {
			return nil, err
		}
		out[i] = a
	}
	return out, nil
}

// updateClientConfig puts entry into the client configuration file path,
// first (the default cluster), in place of the entry of the same name,
// keeping the other clusters' entries. The file is written only if its content changes; changed
// reports whether it did. A file that cannot be parsed is replaced.
func updateClientConfig(path string, entry clientconf.Cluster) (changed bool, err error) {
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	entries := []clientconf.Cluster{entry}
	if es, perr := clientconf.Parse(string(old)); perr == nil && len(old) > 0 {
		entries = withEntry(es, entry)
	}
	return writeIfChanged(path, old, clientconf.Format(entries))
}

// withEntry returns entries with entry first, in place of the one of the
// same name: the cluster just started is the one clients use when they name
// none.
func withEntry(entries []clientconf.Cluster, entry clientconf.Cluster) []clientconf.Cluster {
	out := []clientconf.Cluster{entry}
	for _, e := range entries {
		if e.Name != entry.Name {
			out = append(out, e)
		}
	}
	return out
}

// writeIfChanged writes text to path (privately) unless it holds text.
func writeIfChanged(path string, old []byte, text string) (bool, error) {
	if string(old) == text {
		return false, nil
	}
	return true, writePrivate(path, []byte(text))
}

// resolveSettings returns the settings of this start of the cluster: the
// recorded ones (rec, if found), each replaced by the flag's value (from
// flags) where the flag was given. The cluster name and the blocksize of a
// cluster that exists cannot change: its volumes and namespace hold them.
func resolveSettings(rec clusterSettings, found bool, flags clusterSettings, given map[string]bool) (clusterSettings, error) {
	if !found {
		return flags, nil
	}
	if given["cluster"] && rec.Cluster != "" && flags.Cluster != rec.Cluster {
		return rec, usagef("-cluster %s: this directory holds cluster %q (its volumes belong to it)", flags.Cluster, rec.Cluster)
	}
	if recStore := cmp.Or(rec.Store, storeSQLite); given["store"] && flags.Store != recStore {
		return rec, usagef("-store %s: the cluster keeps its metadata in %s (move it with 'plasma namenode migrate')", flags.Store, recStore)
	}
	if given["blocksize"] && rec.Blocksize != 0 && flags.Blocksize != rec.Blocksize {
		return rec, usagef("-blocksize %s: the cluster was made with blocksize %s, which cannot change", sizeString(flags.Blocksize), sizeString(rec.Blocksize))
	}
	s := rec
	pick := func(flag string, dst *string, v string) {
		if given[flag] || *dst == "" {
			*dst = v
		}
	}
	pick("cluster", &s.Cluster, flags.Cluster)
	pick("namenode-addr", &s.NamenodeAddr, flags.NamenodeAddr)
	pick("security", &s.Security, flags.Security)
	pick("data-security", &s.DataSecurity, flags.DataSecurity)
	pickInt := func(flag string, dst *int64, v int64) {
		if given[flag] || *dst <= 0 {
			*dst = v
		}
	}
	pickInt("blocksize", &s.Blocksize, flags.Blocksize)
	pickInt("size", &s.VolumeSize, flags.VolumeSize)
	if given["datanodes"] || s.Datanodes <= 0 {
		s.Datanodes = flags.Datanodes
	}
	if given["taskserver-slots"] || s.TaskServerSlots < 0 {
		s.TaskServerSlots = flags.TaskServerSlots
	}
	if given["relaxed"] {
		s.Relaxed = flags.Relaxed
	}
	if given["webhdfs"] {
		s.WebHDFSAddr = flags.WebHDFSAddr
	}
	return s, nil
}
