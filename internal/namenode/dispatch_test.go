package namenode

import (
	"testing"

	"github.com/plasmafs/plasma/internal/wire"
)

// TestDispatchTable: every operation of the protocol is in the dispatch
// table, and the checks the table asks for are the ones the operations
// need.
func TestDispatchTable(t *testing.T) {
	for op := wire.OpInvalid + 1; op.String() != "op?"; op++ {
		if _, ok := opTable[op]; !ok {
			t.Errorf("%s is not in the operation table", op)
		}
	}
	// The operations that wait for the store answer themselves, later,
	// outside the lock: the dispatcher's checks and transaction lookup do
	// not apply to them.
	for _, op := range []wire.Op{wire.OpCommit, wire.OpSync, wire.OpRegister, wire.OpBackup} {
		if opTable[op].flags != opOutsideTxn {
			t.Errorf("%s answers itself but its entry asks the dispatcher for checks (%b)", op, opTable[op].flags)
		}
		_, err := opTable[op].run(nil, nil, nil, nil, &wire.Request{Op: op})
		if _, later := err.(*answersLater); !later {
			t.Errorf("%s: the handler returned %v, want an answer later", op, err)
		}
	}
	mutating := []wire.Op{wire.OpCreate, wire.OpSetAttr, wire.OpUnlink, wire.OpRename, wire.OpLink,
		wire.OpAllocate, wire.OpSetBlocks, wire.OpDropReplicas}
	for _, op := range mutating {
		if opTable[op].flags&opNeedsTxn == 0 {
			t.Errorf("%s changes metadata but does not need a transaction", op)
		}
	}
	for op, spec := range opTable {
		if spec.flags&opNeedsTxn != 0 && spec.flags&opOutsideTxn != 0 {
			t.Errorf("%s both needs a transaction and runs outside one", op)
		}
	}
	if opTable[wire.OpHeartbeat].flags&opDatanode == 0 {
		t.Error("heartbeats are not limited to datanodes")
	}
	if opTable[wire.OpFsck].flags&opSuperuser == 0 {
		t.Error("fsck is not limited to the superuser")
	}
	for _, op := range []wire.Op{wire.OpStat, wire.OpBlocks, wire.OpReadDir, wire.OpSetAttr, wire.OpAllocate, wire.OpSetBlocks} {
		if opTable[op].flags&opReachIno == 0 {
			t.Errorf("%s addresses an inode without the reachability check", op)
		}
	}
}
