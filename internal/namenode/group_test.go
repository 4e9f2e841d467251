package namenode

import (
	"path/filepath"
	"testing"
)

func TestParsePeers(t *testing.T) {
	ps, err := ParsePeers("1=127.0.0.1:2730, 2=127.0.0.1:2740,3=h:2750")
	if err != nil || len(ps) != 3 || ps[1] != (Peer{ID: "2", Addr: "127.0.0.1:2740"}) {
		t.Fatalf("%v %v", ps, err)
	}
	for _, bad := range []string{"", "1", "1=", "=h:1", "1=h:1,1=h:2", "1=h:1,2=h:1", "1=h:65535", "1=h:x"} {
		if _, err := ParsePeers(bad); err == nil {
			t.Errorf("ParsePeers(%q) accepted", bad)
		}
	}
	if a, _ := RaftAddr("h:2730"); a != "h:2731" {
		t.Fatalf("RaftAddr: %s", a)
	}
}

func TestGroupIDDependsOnEverything(t *testing.T) {
	ps := []Peer{{"1", "h:1"}, {"2", "h:3"}}
	rev := []Peer{{"2", "h:3"}, {"1", "h:1"}}
	id := groupID("ns", ps, 0)
	if groupID("ns", rev, 0) != id {
		t.Fatal("the order of the peers changes the group id")
	}
	for _, other := range []string{groupID("ns2", ps, 0), groupID("ns", ps, 1), groupID("ns", ps[:1], 0), groupID("ns", []Peer{{"1", "h:1"}, {"2", "h:5"}}, 0)} {
		if other == id {
			t.Fatal("a different group has the same id")
		}
	}
}

func TestRaftStoreKeepsStableState(t *testing.T) {
	path := filepath.Join(t.TempDir(), "raft.db")
	s, err := openRaftStore(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetUint64([]byte("CurrentTerm"), 7); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if s, err = openRaftStore(path); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if v, _ := s.GetUint64([]byte("CurrentTerm")); v != 7 {
		t.Fatalf("stable term %d", v)
	}
	if v, err := s.Get([]byte("missing")); err != nil || len(v) != 0 {
		t.Fatalf("missing key: %v %v", v, err)
	}
}
