package ha

import (
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// rawRPC is one TCP connection to the NFS bridge on which the test
// writes RPC records of its own making, so that it can send a call twice
// with one xid, as a client retransmits it.
type rawRPC struct {
	t    *testing.T
	conn net.Conn
}

func dialRawRPC(t *testing.T, addr string) *rawRPC {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	testkit.MustOK(t, "dial the NFS bridge", err)
	t.Cleanup(func() { conn.Close() })
	// A missing reply fails the test instead of hanging it.
	conn.SetDeadline(time.Now().Add(time.Minute))
	return &rawRPC{t: t, conn: conn}
}

// call is an RPC call record with an AUTH_UNIX credential for uid 0.
func (r *rawRPC) call(xid, prog, vers, proc uint32, args []byte) []byte {
	cred := binary.BigEndian.AppendUint32(nil, 0)                // stamp
	cred = appendOpaque(cred, []byte("client"))                  // machine name
	cred = binary.BigEndian.AppendUint32(cred, 0)                // uid
	cred = binary.BigEndian.AppendUint32(cred, 0)                // gid
	cred = binary.BigEndian.AppendUint32(cred, 0)                // no other gids
	rec := binary.BigEndian.AppendUint32(nil, 0)                 // record mark, below
	for _, w := range []uint32{xid, 0, 2, prog, vers, proc, 1} { // CALL, RPC version 2, AUTH_UNIX
		rec = binary.BigEndian.AppendUint32(rec, w)
	}
	rec = appendOpaque(rec, cred)
	rec = binary.BigEndian.AppendUint32(rec, 0) // AUTH_NONE verifier
	rec = binary.BigEndian.AppendUint32(rec, 0)
	rec = append(rec, args...)
	binary.BigEndian.PutUint32(rec, uint32(len(rec)-4)|1<<31)
	return rec
}

func (r *rawRPC) send(recs ...[]byte) {
	r.t.Helper()
	for _, rec := range recs {
		_, err := r.conn.Write(rec)
		testkit.MustOK(r.t, "send an RPC call", err)
	}
}

// reply reads the next reply and returns its xid and the procedure's
// results (after an accepted, successful reply header).
func (r *rawRPC) reply() (xid uint32, results []byte) {
	r.t.Helper()
	var hdr [4]byte
	_, err := io.ReadFull(r.conn, hdr[:])
	testkit.MustOK(r.t, "read an RPC reply", err)
	body := make([]byte, binary.BigEndian.Uint32(hdr[:])&^(1<<31))
	_, err = io.ReadFull(r.conn, body)
	testkit.MustOK(r.t, "read an RPC reply", err)
	// xid, REPLY, MSG_ACCEPTED, verifier (flavor, empty body), SUCCESS
	if len(body) < 24 || binary.BigEndian.Uint32(body[8:]) != 0 || binary.BigEndian.Uint32(body[20:]) != 0 {
		r.t.Fatalf("RPC reply %x: not an accepted, successful reply", body)
	}
	return binary.BigEndian.Uint32(body), body[24:]
}

func appendOpaque(b, v []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
	b = append(b, v...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// A call of the NFS bridge waits out a namenode failover, longer than a
// client's timeout, so the client retransmits it (same xid, same
// connection). The retransmission is not run again: a GUARDED CREATE sent
// twice creates the file and is answered once, NFS3_OK (run again, it was
// answered a second time, NFS3ERR_EXIST, and go-nfs-client, the one of
// TestNFSRidesThroughFailover, stops reading replies when a call is
// answered twice).
func TestNFSRetransmittedCallRunsOnce(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	b := testkit.StartNFS(t, c)
	r := dialRawRPC(t, b.Addr)

	r.send(r.call(1, 100005, 3, 1, appendOpaque(nil, []byte("/")))) // MOUNT MNT "/"
	xid, res := r.reply()
	if xid != 1 || len(res) < 8 || binary.BigEndian.Uint32(res) != 0 {
		t.Fatalf("MNT /: reply to xid %d: %x", xid, res)
	}
	root := res[8 : 8+binary.BigEndian.Uint32(res[4:])]

	// CREATE GUARDED "once" (no attributes set), twice with xid 2, then
	// NULL with xid 3.
	args := appendOpaque(nil, root)
	args = appendOpaque(args, []byte("once"))
	args = binary.BigEndian.AppendUint32(args, 1) // GUARDED
	for range 6 {
		args = binary.BigEndian.AppendUint32(args, 0) // sattr3: nothing set
	}
	create := r.call(2, 100003, 3, 8, args)
	r.send(create, create, r.call(3, 100003, 3, 0, nil))
	xid, res = r.reply()
	if xid != 2 || len(res) < 4 || binary.BigEndian.Uint32(res) != 0 {
		t.Fatalf("CREATE GUARDED: reply to xid %d: %x; want xid 2, NFS3_OK", xid, res)
	}
	if xid, res = r.reply(); xid != 3 {
		status := uint32(0)
		if len(res) >= 4 {
			status = binary.BigEndian.Uint32(res)
		}
		t.Fatalf("the reply after CREATE's is to xid %d (nfsstat3 %d), want 3 (NULL): the retransmitted CREATE was run again", xid, status)
	}
	if out, code := c.Run(nil, "stat", "/once"); code != 0 {
		t.Fatalf("plasma stat /once: exit %d\n%s", code, out)
	}
}
