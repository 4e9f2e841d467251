package namenode

// lockTable is the namenode's lock manager: exclusive and shared locks on
// inodes and directory entries, held by transactions until they end.
// Requests never wait: a lock another transaction holds is a conflict
// reported at once, and the client retries its transaction.
//
// Lock discipline: a lockTable has no mutex of its own; it is guarded by
// Namenode.mu, like the transactions that hold its locks. Each holder
// records the keys it took in its Txn.locks, so release walks only those.
type lockTable struct {
	m map[lockKey]*lockState
}

type lockKey struct {
	ino   uint64
	name  string
	entry bool // a directory entry (ino is the parent) rather than an inode
}

// lockState: an exclusive owner, or any number of shared holders (shared
// locks on a directory keep it from being removed while entries are
// created in it).
type lockState struct {
	owner  *Txn
	shared map[*Txn]bool
}

func newLockTable() *lockTable { return &lockTable{m: map[lockKey]*lockState{}} }

func (t *lockTable) state(k lockKey) *lockState {
	l := t.m[k]
	if l == nil {
		l = &lockState{}
		t.m[k] = l
	}
	return l
}

// exclusive takes k for tx alone, or returns errConflict if any other
// transaction holds it. A shared lock tx alone holds is upgraded.
func (t *lockTable) exclusive(tx *Txn, k lockKey) error {
	l := t.state(k)
	if l.owner == tx {
		return nil
	}
	if l.owner != nil {
		return errConflict
	}
	for h := range l.shared {
		if h != tx {
			return errConflict
		}
	}
	l.owner = tx
	tx.locks = append(tx.locks, k)
	return nil
}

// shared takes k shared for tx, or returns errConflict if another
// transaction holds it exclusively.
func (t *lockTable) shared(tx *Txn, k lockKey) error {
	l := t.state(k)
	if l.owner != nil && l.owner != tx {
		return errConflict
	}
	if l.shared[tx] || l.owner == tx {
		return nil
	}
	if l.shared == nil {
		l.shared = map[*Txn]bool{}
	}
	l.shared[tx] = true
	tx.locks = append(tx.locks, k)
	return nil
}

// releaseAll drops every lock tx holds; keys nobody holds any more are
// forgotten, so the table only holds locks in use.
func (t *lockTable) releaseAll(tx *Txn) {
	for _, k := range tx.locks {
		l := t.m[k]
		if l == nil {
			continue
		}
		if l.owner == tx {
			l.owner = nil
		}
		delete(l.shared, tx)
		if l.owner == nil && len(l.shared) == 0 {
			delete(t.m, k)
		}
	}
	tx.locks = nil
}

// held is the number of keys locked by anyone.
func (t *lockTable) held() int { return len(t.m) }

func inodeKey(ino uint64) lockKey { return lockKey{ino: ino} }
func entryKey(parent uint64, name string) lockKey {
	return lockKey{ino: parent, name: name, entry: true}
}
