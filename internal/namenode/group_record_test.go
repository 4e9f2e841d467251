package namenode

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A member restarted after changes of members takes -peers listing the
// group it was formed with or its members now, and nothing else; a member
// recorded as removed refuses to start; one that joined as new takes its
// -join id.
func TestGroupRecordAfterMembershipChanges(t *testing.T) {
	formed := []Peer{{"1", "h1:2730"}, {"2", "h2:2730"}, {"3", "h3:2730"}}
	now := []Peer{{"1", "h1:2730"}, {"3", "h3:2730"}, {"4", "h4:2730"}}
	record := func(t *testing.T, gf groupFile) string {
		dir := t.TempDir()
		if err := writeGroupFile(dir, gf); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "raft.db"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	dir := record(t, groupFile{Group: "g", Self: "1", Peers: formed, Members: now, Namespace: "ns"})
	for _, tc := range []struct {
		peers []Peer
		join  string
		want  string // "" accepted, else in the refusal
	}{
		{formed, "", ""},
		{now, "", ""},
		{[]Peer{{"1", "h1:2730"}, {"2", "h2:2730"}}, "", "not -peers"},
		{[]Peer{{"1", "h1:2730"}}, "other", "not -join other"},
	} {
		_, err := checkGroupFile(GroupConfig{Self: "1", Peers: tc.peers, Dir: dir, Join: tc.join}, "ns", 0)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("-peers %s -join %q: %v; want %q", formatPeers(tc.peers), tc.join, err, tc.want)
		}
	}
	removed := record(t, groupFile{Group: "g", Self: "2", Peers: formed, Members: now, Namespace: "ns", Removed: true})
	if _, err := checkGroupFile(GroupConfig{Self: "2", Peers: formed, Dir: removed}, "ns", 0); err == nil || !strings.Contains(err.Error(), "was removed") {
		t.Errorf("a removed member: %v", err)
	}
	joined := record(t, groupFile{Group: "g", Self: "4", Peers: []Peer{{"4", "h4:2730"}}, Members: now, Namespace: "ns", Joined: true})
	if _, err := checkGroupFile(GroupConfig{Self: "4", Peers: []Peer{{"4", "h4:2730"}}, Dir: joined, Join: "g"}, "ns", 0); err != nil {
		t.Errorf("a joined member restarted with -join: %v", err)
	}
	if _, err := checkGroupFile(GroupConfig{Self: "4", Peers: now, Dir: joined}, "ns", 0); err != nil {
		t.Errorf("a joined member restarted with -peers listing the members: %v", err)
	}
	if _, err := checkGroupFile(GroupConfig{Self: "4", Peers: []Peer{{"4", "h4:2730"}}, Dir: joined}, "ns", 0); err == nil {
		t.Errorf("a joined member restarted with -peers listing only itself was accepted")
	}
}
