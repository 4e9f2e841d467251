package namenode

import (
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
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

func TestRaftStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "raft.db")
	s, err := openRaftStore(path)
	if err != nil {
		t.Fatal(err)
	}
	if i, _ := s.FirstIndex(); i != 0 {
		t.Fatalf("empty store: first index %d", i)
	}
	var logs []*raft.Log
	for i := uint64(1); i <= 10; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: 1 + i/5, Type: raft.LogCommand, Data: []byte{byte(i)}})
	}
	if err := s.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteRange(8, 10); err != nil { // a conflicting suffix
		t.Fatal(err)
	}
	if err := s.DeleteRange(1, 3); err != nil { // compaction
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
	first, _ := s.FirstIndex()
	last, _ := s.LastIndex()
	if first != 4 || last != 7 {
		t.Fatalf("after deletions and a reopen: first %d, last %d; want 4, 7", first, last)
	}
	var l raft.Log
	if err := s.GetLog(6, &l); err != nil || l.Term != 2 || l.Data[0] != 6 || l.Type != raft.LogCommand {
		t.Fatalf("GetLog(6): %+v %v", l, err)
	}
	if err := s.GetLog(9, &l); err != raft.ErrLogNotFound {
		t.Fatalf("GetLog of a deleted entry: %v", err)
	}
	if v, _ := s.GetUint64([]byte("CurrentTerm")); v != 7 {
		t.Fatalf("stable term %d", v)
	}
	if v, err := s.Get([]byte("missing")); err != nil || len(v) != 0 {
		t.Fatalf("missing key: %v %v", v, err)
	}
}
