package clusterup

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// groupMemberPid finds the process of the cluster's namenode group member
// listening at addr (by its command line).
func (lc *localCluster) groupMemberPid(addr string) int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		argv := strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
		if len(argv) < 2 || argv[1] != "namenode" {
			continue
		}
		for i := 0; i+1 < len(argv); i++ {
			if argv[i] == "-listen" && argv[i+1] == addr && strings.Contains(strings.Join(argv, " "), lc.dir) {
				return pid
			}
		}
	}
	return 0
}

type groupRow struct {
	Addr, Role, Error string
	Lag               uint64
}

// namenodes runs 'plasma admin namenodes -json' (its exit code is not 0
// while a member is unreachable).
func (lc *localCluster) namenodes() []groupRow {
	out, _ := lc.run("admin", "namenodes", "-json")
	var rows []groupRow
	json.Unmarshal([]byte(out), &rows)
	return rows
}

// Issue 22: 'cluster up -namenodes 3' runs a namenode group, supervised:
// the client configuration lists the members, a kill -9 of the leader
// elects another, the datanode registers with it, clients find it and go
// on reading and writing, and the supervisor brings the killed member
// back as a follower that catches up.
func TestClusterUpNamenodeGroup(t *testing.T) {
	lc := newLocalCluster(t)
	lc.mustRun(lc.upArgs("-detach", "-namenodes", "3", "-datanodes", "1", "-taskserver-slots", "0")...)
	src := filepath.Join(lc.home, "f")
	if err := os.WriteFile(src, []byte("replicated namenodes\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	lc.mustRun("put", src, "/f")
	var leader string
	for _, r := range lc.namenodes() {
		if r.Role == "leader" {
			leader = r.Addr
		}
	}
	pid := lc.groupMemberPid(leader)
	if leader == "" || pid == 0 {
		t.Fatalf("no leader process among %+v", lc.namenodes())
	}
	syscall.Kill(pid, syscall.SIGKILL)
	// The new leader learns the datanode's address when it registers
	// again (as a restarted namenode does); clients find the new leader
	// themselves meanwhile.
	deadline := time.Now().Add(60 * time.Second)
	for {
		var st struct{ Datanodes []struct{ Alive bool } }
		out := lc.mustRun("fsstat", "-json")
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatalf("fsstat -json: %v\n%s", err, out)
		}
		if len(st.Datanodes) == 1 && st.Datanodes[0].Alive {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the datanode is not live on the new leader 60s after the failover: %s", out)
		}
		time.Sleep(50 * time.Millisecond) // polling a condition
	}
	if out := lc.mustRun("cat", "/f"); out != "replicated namenodes\n" {
		t.Fatalf("cat after the leader's kill: %q", out)
	}
	lc.mustRun("put", src, "/g")
	deadline = time.Now().Add(60 * time.Second)
	for {
		rows := lc.namenodes()
		roles := map[string]int{}
		lagging := false
		for _, r := range rows {
			roles[r.Role]++
			lagging = lagging || r.Lag > 0
		}
		if len(rows) == 3 && roles["leader"] == 1 && roles["follower"] == 2 && !lagging {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the group is not whole again 60s after its leader's kill: %+v", rows)
		}
		time.Sleep(50 * time.Millisecond) // polling a condition
	}
	if p := lc.groupMemberPid(leader); p == 0 || p == pid {
		t.Fatalf("the killed member was not restarted (pid %d, was %d)", p, pid)
	}
}
