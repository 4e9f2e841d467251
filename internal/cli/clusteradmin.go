package cli

import (
	"fmt"
	"sort"
	"strings"

	"github.com/plasmafs/plasma/internal/loopback"
)

// clusterMembers names the members of a 'cluster up' cluster that get an
// admin port: the namenode, dn1..dnN, ts1..tsN (with task servers), the
// mount (with -mount) and the WebHDFS gateway (with -webhdfs).
func clusterMembers(datanodes int, taskServers, mount, webhdfs bool) []string {
	out := []string{"namenode"}
	for i := 1; i <= datanodes; i++ {
		out = append(out, fmt.Sprintf("dn%d", i))
	}
	for i := 1; taskServers && i <= datanodes; i++ {
		out = append(out, fmt.Sprintf("ts%d", i))
	}
	if mount {
		out = append(out, "mount")
	}
	if webhdfs {
		out = append(out, "webhdfs")
	}
	return out
}

// keptAdminAddrs returns an admin address on loopback for each member:
// the recorded one if it is free, a new free port otherwise.
func keptAdminAddrs(recorded map[string]string, members []string) (map[string]string, error) {
	out := map[string]string{}
	for _, m := range members {
		if a := recorded[m]; a != "" && loopback.Claim(a) {
			out[m] = a
			continue
		}
		a, err := freePort()
		if err != nil {
			return nil, err
		}
		out[m] = a
	}
	return out, nil
}

// datanodeAdminLinks is the namenode's -datanode-admin value: each
// datanode's data address with its admin address.
func datanodeAdminLinks(dataAddrs []string, admin map[string]string) string {
	var l []string
	for i, a := range dataAddrs {
		if ad := admin[fmt.Sprintf("dn%d", i+1)]; ad != "" {
			l = append(l, a+"="+ad)
		}
	}
	return strings.Join(l, ",")
}

// adminSummary lists the admin pages, namenode first, for the start-up
// message.
func adminSummary(admin map[string]string) string {
	var names []string
	for m := range admin {
		if m != "namenode" {
			names = append(names, m)
		}
	}
	sort.Strings(names)
	s := "status page http://" + admin["namenode"] + "/ ; metrics at /metrics of each:"
	if admin["namenode"] == "" {
		s = "metrics at /metrics of each:" // a namenode group's members have no admin port yet
	} else {
		names = append([]string{"namenode"}, names...)
	}
	for _, m := range names {
		s += " " + m + " " + admin[m]
	}
	return s
}

// withAdminFlag adds -admin-listen addr to a member's arguments: at the
// end, except for the mount, whose mountpoint stays the last argument
// (as a user types it, and as 'ps' shows it).
func withAdminFlag(args []string, kind, addr string) []string {
	if kind == "mount" && len(args) > 0 {
		last := args[len(args)-1]
		return append(append(args[:len(args)-1:len(args)-1], "-admin-listen", addr), last)
	}
	return append(args, "-admin-listen", addr)
}
