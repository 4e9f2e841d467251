package ha

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
)

// Issue 22, items 5 and 6: changes of members that are wrong are refused
// with what is wrong, exit status 1 (2 for a bad command line), and
// change nothing: an id or address already a member, an unknown id, a
// namenode that is not waiting to join this group (started for another
// group id), one not running, and a removal that would leave fewer live
// voters than a majority.
func TestMemberChangesRefuseBadInput(t *testing.T) {
	g := startGroup(t, 3, 0)
	other := g.joinMember("4", "0123456789abcdef") // waits to join another group
	g.members = g.members[:3]                      // not one of this group's
	defer func() {
		other.cmd.Process.Kill()
		<-other.done
	}()
	l := g.leader()
	f := g.follower()
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"namenode", "add", f.id, f.addr}, 1, "is a member already"},
		{[]string{"namenode", "add", "5", f.addr}, 1, "is member " + f.id + "'s"},
		{[]string{"namenode", "remove", "9"}, 1, `no namenode "9" in the group`},
		{[]string{"namenode", "add", "4", other.addr}, 1, "not waiting to join group"},
		{[]string{"namenode", "add", "6", "127.0.0.1:1"}, 1, "does not answer"},
		{[]string{"namenode", "add", "7=x", "127.0.0.1:1"}, 1, "want a name without"},
		{[]string{"namenode", "frob", "1"}, 2, "unknown namenode operation"},
		{[]string{"namenode", "add", "1"}, 2, "want 'add ID ADDR'"},
	} {
		out, err := g.admin(tc.args...)
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != tc.code || !strings.Contains(out, tc.want) {
			t.Fatalf("plasma admin %s: %v\n%s\nwant exit status %d saying %q", strings.Join(tc.args, " "), err, out, tc.code, tc.want)
		}
	}
	// One follower down: removing the other would leave the leader and
	// the dead one, one live voter of the two a majority needs.
	var live *member
	for _, m := range g.members {
		if m != l && m != f {
			live = m
		}
	}
	g.kill(f)
	out, err := g.admin("namenode", "remove", live.id)
	if err == nil || !strings.Contains(out, "fewer than the 2 a majority needs") {
		t.Fatalf("removing a live follower with the other dead: %v\n%s\nwant a refusal", err, out)
	}
	// Nothing changed: the group is still the three members.
	st, err := g.status(l)
	if err != nil || st.role != "leader" {
		t.Fatalf("the leader after the refusals: %+v %v", st, err)
	}
	// (It exits 1: a member is down.)
	out, _ = g.admin("namenodes")
	if !strings.Contains(out, "namenode group "+g.groupID()+"\n") || strings.Count(out, "\n127.0.0.1:") != 3 || strings.Contains(out, other.addr) {
		t.Fatalf("plasma admin namenodes after the refusals (want the three members):\n%s", out)
	}
}
