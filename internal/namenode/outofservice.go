package namenode

import "fmt"

// outOfService says, for an error about too few live datanodes, how many
// more are alive but take no new blocks (disabled or draining), which a
// count of live ones alone hides; "" when there are none. Called with
// n.mu held.
func (n *Namenode) outOfService() string {
	k := 0
	for _, dn := range n.nodes.byID {
		if dn.alive && !dn.Enabled {
			k++
		}
	}
	if k == 0 {
		return ""
	}
	return fmt.Sprintf(" and in service (%d more alive but disabled or draining, taking no new blocks: 'plasma admin datanodes' lists them, 'plasma admin datanode enable ID' puts one back)", k)
}
