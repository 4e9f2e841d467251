// Datanode operations: plasma admin datanodes, plasma admin datanode
// drain|disable|enable|remove ID.
package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/plasmafs/plasma/client"
)

// jsonDatanodeStatus is one row of 'plasma admin datanodes -json': the
// admin_table row (jsonTableRow) and the replicator's view.
type jsonDatanodeStatus struct {
	jsonTableRow
	Service  string `json:"service"`
	Replicas uint64 `json:"replicas"`
	LastSeen string `json:"last_heartbeat,omitempty"` // RFC 3339
	Copies   int    `json:"copies"`
	Leaving  uint64 `json:"leaving"`
	// The scrubber: end of its last full pass (RFC 3339), the blocks it
	// verified, and the volume's blocks the current pass has gone through.
	ScrubLastPass string `json:"scrub_last_pass,omitempty"`
	ScrubVerified uint64 `json:"scrub_blocks_verified"`
	ScrubPassed   uint64 `json:"scrub_passed_blocks"`
}

func datanodeRow(n client.DatanodeStatus, scrub client.ScrubProgress) jsonDatanodeStatus {
	row := jsonDatanodeStatus{jsonTableRow: jsonTableRow{ID: n.ID, Identity: n.Identity, Addr: n.Addr, State: nodeState(n.Datanode),
		Capacity: n.Blocks * uint64(n.Blocksize), Used: n.Used * uint64(n.Blocksize), Alive: n.Alive},
		Service: n.State, Replicas: n.Replicas, Copies: n.Copies, Leaving: n.Leaving}
	if !n.LastSeen.IsZero() {
		row.LastSeen = n.LastSeen.UTC().Format(time.RFC3339)
	}
	if !scrub.LastPass.IsZero() {
		row.ScrubLastPass = scrub.LastPass.UTC().Format(time.RFC3339)
	}
	row.ScrubVerified, row.ScrubPassed = scrub.Verified, scrub.Passed
	return row
}

// adminDatanodes lists the datanodes with their service state and the
// replication work each takes part in.
func adminDatanodes(ctx context.Context, args []string) error {
	f := newFlags("admin datanodes", "[-json]", `List the datanodes: id, identity, service state (in service; down: dead, its
replicas still counted; dead: down longer than the namenode's -dead-after, its
replicas are being replaced; disabled: no new blocks; draining; drained),
capacity, used, the blocks it holds replicas of, its last heartbeat, the
re-replication copies it takes part in and the blocks waiting to leave it.
Then the namenode's replication queue, and how far each datanode's scrubber
got (its last full pass, the blocks it verified, the current pass).
Superuser only.`, true)
	out := newPrinter(f, "one JSON object per datanode: id, identity, addr, state, capacity, used, alive (as admin_table),\nservice, replicas, last_heartbeat, copies, leaving, scrub_last_pass, scrub_blocks_verified,\nscrub_passed_blocks")
	return withClient(ctx, f, args, 0, 0, func(c *client.Client) error {
		s, err := c.ReplicationStatus(ctx)
		if err != nil {
			return err
		}
		scrub := scrubByNode(ctx, c, "admin datanodes")
		if out.JSON() {
			for _, n := range s.Nodes {
				if err := out.item(datanodeRow(n, scrub[n.ID]), nil); err != nil {
					return err
				}
			}
			return nil
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tIDENTITY\tSTATE\tCAPACITY\tUSED\tBLOCKS\tLAST HEARTBEAT\tCOPIES\tLEAVING")
		now := time.Now()
		for _, n := range s.Nodes {
			r := datanodeRow(n, scrub[n.ID])
			seen := "never"
			if !n.LastSeen.IsZero() {
				seen = now.Sub(n.LastSeen).Round(time.Second).String() + " ago"
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%d\t%s\t%d\t%d\n", r.ID, escapeName(r.Identity), r.Service, sizeString(int64(r.Capacity)),
				sizeString(int64(r.Used)), r.Replicas, seen, r.Copies, r.Leaving)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		printReplication(stdout, s)
		printScrub(stdout, scrub, s.Nodes)
		return nil
	})
}

// printReplication prints the replication queue and the copies in flight.
func printReplication(w io.Writer, s client.ReplicationStatus) {
	fmt.Fprintf(w, "replication: %d blocks queued, %d being copied, %d under-replicated (%d waiting for down datanodes), %d with no live replica, %d damaged replicas reported; since start %d copied, %d trimmed, %d copies failed\n",
		s.Queued, s.InFlight, s.Under, s.Waiting, s.Lost, s.Damaged, s.Copied, s.Trimmed, s.Failed)
	for _, c := range s.Copies {
		fmt.Fprintf(w, "  copying %s\n", escapeText(c))
	}
}

// adminDatanode changes a datanode's service state.
func adminDatanode(ctx context.Context, args []string) error {
	f := newFlags("admin datanode", "drain|disable|enable|remove ID|IDENTITY [-wait]", `Change a datanode's service state. Superuser only.
  drain    move every replica off the datanode (it keeps serving reads until
           its replicas have copies elsewhere) and then keep it disabled;
           with -wait, report progress until it is empty
  disable  give it no new blocks; it keeps its replicas
  enable   put it back in service (also ends a drain)
  remove   take it out of the cluster for good: once it is drained, or once it
           has been dead for the namenode's -dead-after with a copy of each of
           its blocks on a live datanode (refused while it holds the only
           replica of anything). Its volume is refused if it comes back; to
           reuse the disk, initialise a new volume there.
The namenode records each change before it answers: a drain goes on, and a
removed datanode stays removed, after a namenode restart.`, true)
	wait := f.Bool("wait", false, "drain: wait until the datanode holds no replica, reporting progress")
	return withClient(ctx, f, args, 2, 2, func(c *client.Client) error {
		op := f.pos[0]
		switch op {
		case "drain", "disable", "enable", "remove":
		default:
			return usagef("unknown datanode operation %q (drain, disable, enable or remove)", op)
		}
		id, err := datanodeID(ctx, c, f.pos[1])
		if err != nil {
			return err
		}
		s, err := c.DatanodeAdmin(ctx, op, id)
		if err != nil {
			return fmt.Errorf("datanode %s: %w", f.pos[1], err)
		}
		fmt.Fprintf(stdout, "datanode %d: %s\n", id, stateOf(s, id))
		if op != "drain" || !*wait {
			return nil
		}
		return awaitDrained(ctx, c, id)
	})
}

// awaitDrained reports a drain's progress until the datanode is empty.
func awaitDrained(ctx context.Context, c *client.Client, id uint32) error {
	last := ""
	for {
		s, err := c.ReplicationStatus(ctx)
		if err != nil {
			return err
		}
		for _, n := range s.Nodes {
			if n.ID != id {
				continue
			}
			if n.State != "draining" {
				fmt.Fprintf(stdout, "datanode %d: %s\n", id, n.State)
				if n.State == "drained" {
					return nil
				}
				return fmt.Errorf("datanode %d is %s, no longer draining", id, n.State)
			}
			line := fmt.Sprintf("datanode %d: draining, %d blocks left, %d copies in flight", id, n.Replicas, n.Copies)
			if n.Replicas > 0 && !otherInService(s, id) {
				// Copies go only to datanodes in service: say why nothing
				// moves rather than wait silently.
				line = fmt.Sprintf("datanode %d: draining, %d blocks left, and no other datanode is in service to take them: waiting (start or enable another datanode; 'plasma admin datanode enable %d' ends the drain)", id, n.Replicas, id)
			}
			if line != last {
				fmt.Fprintln(stdout, line)
				last = line
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// otherInService reports whether a datanode other than id is in service
// (alive, enabled, not draining): one that can take re-replication copies.
func otherInService(s client.ReplicationStatus, id uint32) bool {
	for _, n := range s.Nodes {
		if n.ID != id && n.State == "in service" {
			return true
		}
	}
	return false
}

func stateOf(s client.ReplicationStatus, id uint32) string {
	for _, n := range s.Nodes {
		if n.ID == id {
			return fmt.Sprintf("%s, %d blocks held", n.State, n.Replicas)
		}
	}
	return "removed from the cluster"
}

// datanodeID resolves a datanode named by its id or identity.
func datanodeID(ctx context.Context, c *client.Client, arg string) (uint32, error) {
	nodes, err := c.Datanodes(ctx)
	if err != nil {
		return 0, err
	}
	for _, n := range nodes {
		if n.Identity == arg || strconv.FormatUint(uint64(n.ID), 10) == arg {
			return n.ID, nil
		}
	}
	return 0, fmt.Errorf("no datanode %q ('plasma admin datanodes' lists them)", arg)
}

// adminBalance moves replicas from the fullest datanodes to the emptiest.
func adminBalance(ctx context.Context, args []string) error {
	f := newFlags("admin balance", "[-wait]", `Move replicas from the datanodes that use more of their capacity than the
average (by more than 5% of their capacity) to the emptiest ones, e.g. after a
datanode was added; in the background, with the bounds of re-replication.
Superuser only.`, true)
	wait := f.Bool("wait", false, "report progress until the datanodes are balanced")
	return withClient(ctx, f, args, 0, 0, func(c *client.Client) error {
		s, err := c.DatanodeAdmin(ctx, "balance", 0)
		if err != nil {
			return err
		}
		for !s.Balancing || *wait {
			line := "balanced"
			if s.Balancing {
				line = fmt.Sprintf("balancing: %d blocks queued, %d being copied", s.Queued, s.InFlight)
			}
			fmt.Fprintln(stdout, line)
			for _, n := range s.Nodes {
				if n.Blocks > 0 && (n.State == "in service" || n.State == "disabled") {
					fmt.Fprintf(stdout, "  datanode %d: %d of %d blocks (%.0f%%)\n", n.ID, n.Replicas, n.Blocks, 100*float64(n.Replicas)/float64(n.Blocks))
				}
			}
			if !s.Balancing {
				return nil
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Second):
			}
			if s, err = c.ReplicationStatus(ctx); err != nil {
				return err
			}
		}
		fmt.Fprintln(stdout, "balancing started ('plasma admin datanodes' shows the copies)")
		return nil
	})
}
