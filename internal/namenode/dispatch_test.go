package namenode

import (
	"testing"

	"github.com/plasmafs/plasma/internal/wire"
)

// TestDispatchTable: every operation of the protocol is either in the
// dispatch table or one of the few served elsewhere, and the checks the
// table asks for are the ones the operations need.
func TestDispatchTable(t *testing.T) {
	elsewhere := map[wire.Op]string{
		wire.OpCommit:   "the committer",
		wire.OpRegister: "registerAsync",
		wire.OpBackup:   "the server (it writes a file outside the lock)",
		wire.OpSync:     "the server (it waits for durability outside the lock)",
	}
	for op := wire.OpInvalid + 1; op.String() != "op?"; op++ {
		_, inTable := opTable[op]
		_, other := elsewhere[op]
		if inTable == other {
			t.Errorf("%s: in the table %v, served elsewhere %v: want exactly one", op, inTable, other)
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
