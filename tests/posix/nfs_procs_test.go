package posix

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/tests/testkit"
	nfsc "github.com/willscott/go-nfs-client/nfs"
	"github.com/willscott/go-nfs-client/nfs/rpc"
	"github.com/willscott/go-nfs-client/nfs/xdr"

	"github.com/plasmafs/plasma/internal/clustertest"
)

// Raw NFSv3 calls the Go client has no method for (WRITE with a chosen
// stability, COMMIT, LINK), sent through its RPC layer as root (as
// testkit.DialNFS: a call without a credential is anonymous).

func nfsHeader(proc uint32) rpc.Header {
	return rpc.Header{Rpcvers: 2, Prog: nfsc.Nfs3Prog, Vers: nfsc.Nfs3Vers, Proc: proc, Cred: rpc.NewAuthUnix("client", 0, 0).Auth(), Verf: rpc.AuthNull}
}

// nfsStatusErr turns a non-zero nfsstat3 into the client's error type.
func nfsStatusErr(r io.Reader) error {
	st, err := xdr.ReadUint32(r)
	if err != nil {
		return err
	}
	return nfsc.NFS3Error(st)
}

type writeReply struct {
	count, committed uint32
	verf             [8]byte
}

// nfsWrite sends WRITE3 with stability how (0 UNSTABLE, 2 FILE_SYNC).
func nfsWrite(t *testing.T, tg *nfsc.Target, fh []byte, off uint64, data []byte, how uint32) (writeReply, error) {
	t.Helper()
	type args struct {
		rpc.Header
		FH     []byte
		Offset uint64
		Count  uint32
		How    uint32
		Data   []byte
	}
	res, err := tg.Call(&args{nfsHeader(nfsc.NFSProc3Write), fh, off, uint32(len(data)), how, data})
	if err != nil {
		t.Fatalf("WRITE: %v", err)
	}
	if err := nfsStatusErr(res); err != nil {
		return writeReply{}, err
	}
	var body struct {
		Wcc       nfsc.WccData
		Count     uint32
		Committed uint32
		Verf      uint64
	}
	if err := xdr.Read(res, &body); err != nil {
		t.Fatalf("WRITE reply: %v", err)
	}
	r := writeReply{count: body.Count, committed: body.Committed}
	binary.BigEndian.PutUint64(r.verf[:], body.Verf)
	return r, nil
}

// nfsCommit sends COMMIT3 for the whole file and returns the verifier.
func nfsCommit(t *testing.T, tg *nfsc.Target, fh []byte) ([8]byte, error) {
	t.Helper()
	type args struct {
		rpc.Header
		FH     []byte
		Offset uint64
		Count  uint32
	}
	res, err := tg.Call(&args{nfsHeader(nfsc.NFSProc3Commit), fh, 0, 0})
	if err != nil {
		t.Fatalf("COMMIT: %v", err)
	}
	var v [8]byte
	if err := nfsStatusErr(res); err != nil {
		return v, err
	}
	var body struct {
		Wcc  nfsc.WccData
		Verf uint64
	}
	if err := xdr.Read(res, &body); err != nil {
		t.Fatalf("COMMIT reply: %v", err)
	}
	binary.BigEndian.PutUint64(v[:], body.Verf)
	return v, nil
}

// nfsLink sends LINK3: a new name dir/name for the file fh.
func nfsLink(tg *nfsc.Target, fh, dirFH []byte, name string) error {
	type args struct {
		rpc.Header
		FH   []byte
		Dir  []byte
		Name string
	}
	res, err := tg.Call(&args{nfsHeader(15), fh, dirFH, name})
	if err != nil {
		return err
	}
	return nfsStatusErr(res)
}

// TestNFSUnstableWriteCommit: UNSTABLE writes are answered as UNSTABLE,
// read back at once through the bridge, and made permanent by COMMIT: a
// kill -9 of the bridge after COMMIT loses nothing, and the restarted
// bridge answers with another write verifier, which tells clients to
// resend what they had not committed.
func TestNFSUnstableWriteCommit(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	b := testkit.StartNFS(t, c)
	tg := testkit.DialNFS(t, b.Addr)
	f, err := tg.OpenFile("/u", 0o644)
	testkit.MustOK(t, "create", err)
	testkit.MustOK(t, "close", f.Close())
	_, fh, err := tg.Lookup("/u")
	testkit.MustOK(t, "lookup", err)

	data := testkit.SeededBytes(300<<10+5, 3)
	var verf [8]byte
	write := func(from, to int) {
		for off := from; off < to; off += 64 << 10 {
			end := min(off+64<<10, to)
			r, err := nfsWrite(t, tg, fh, uint64(off), data[off:end], 0)
			testkit.MustOK(t, "unstable write", err)
			if r.count != uint32(end-off) || r.committed != 0 {
				t.Fatalf("WRITE answered count %d committed %d, want %d and UNSTABLE (0)", r.count, r.committed, end-off)
			}
			if off > 0 && r.verf != verf {
				t.Fatal("the write verifier changed between two writes of one bridge")
			}
			verf = r.verf
		}
	}
	half := 128 << 10
	write(0, half)
	// The bridge reads its own unstable writes (its READ path opens and
	// closes the file, which commits what is pending: so only the first
	// half is read here, and the second is left to COMMIT alone).
	if got, err := readByHandle(tg, fh, half); err != nil || !bytes.Equal(got, data[:half]) {
		t.Fatalf("read before COMMIT: %d bytes, err %v", len(got), err)
	}
	write(half, len(data))
	cv, err := nfsCommit(t, tg, fh)
	testkit.MustOK(t, "commit", err)
	if cv != verf {
		t.Fatal("COMMIT's verifier differs from the WRITEs' of the same bridge")
	}

	// kill -9 right after COMMIT: what was committed is in PlasmaFS.
	b.Cmd.Process.Signal(syscall.SIGKILL)
	<-b.Done
	if out := c.MustRun("cat", "/u"); out != string(data) {
		t.Fatalf("after COMMIT and a kill -9 of the bridge PlasmaFS holds %d bytes, want %d", len(out), len(data))
	}
	b2 := testkit.StartNFS(t, c)
	tg2 := testkit.DialNFS(t, b2.Addr)
	r, err := nfsWrite(t, tg2, fh, 0, data[:10], 0)
	testkit.MustOK(t, "unstable write after restart", err)
	if r.verf == verf {
		t.Fatal("the restarted bridge answers with the same write verifier: clients would not resend uncommitted writes")
	}
	// A FILE_SYNC write is answered as such and is in PlasmaFS at once.
	r, err = nfsWrite(t, tg2, fh, uint64(len(data)), []byte("tail"), 2)
	testkit.MustOK(t, "stable write", err)
	if r.committed != 2 {
		t.Fatalf("FILE_SYNC write answered committed=%d", r.committed)
	}
	data = append(data, "tail"...)
	b2.Cmd.Process.Signal(syscall.SIGKILL)
	<-b2.Done
	if out := c.MustRun("cat", "/u"); out != string(data) {
		t.Fatalf("after a FILE_SYNC write and a kill -9 of the bridge PlasmaFS holds %d bytes, want %d", len(out), len(data))
	}
}

// TestNFSLinkAndStatuses: LINK makes a second name of a file, and the
// bridge's REMOVE, RMDIR and RENAME report the precise NFSv3 status.
func TestNFSLinkAndStatuses(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	b := testkit.StartNFS(t, c)
	n := nfsTarget{testkit.DialNFS(t, b.Addr)}
	testkit.MustOK(t, "mkdir", n.mkdir("d"))
	testkit.MustOK(t, "write", n.writeFile("d/f", []byte("linked")))
	testkit.MustOK(t, "link", n.link("d/f", "d/g"))
	st, err := n.stat("d/g")
	testkit.MustOK(t, "stat", err)
	if st.nlink != 2 {
		t.Fatalf("nlink %d after LINK, want 2", st.nlink)
	}
	if got, err := n.readFile("d/g"); err != nil || string(got) != "linked" {
		t.Fatalf("read by the new name: %q %v", got, err)
	}
	if out := c.MustRun("stat", "/d/f"); !bytes.Contains([]byte(out), []byte("2")) {
		t.Fatalf("plasma stat after NFS LINK: %s", out)
	}
	wantErrno(t, "link over an existing name", n.link("d/f", "d/g"), syscall.EEXIST)
	wantErrno(t, "rmdir of a non-empty directory", n.rmdir("d"), syscall.ENOTEMPTY)
	wantErrno(t, "rmdir of a file", n.rmdir("d/f"), syscall.ENOTDIR)
	wantErrno(t, "remove of a missing name", n.remove("d/none"), syscall.ENOENT)
	testkit.MustOK(t, "mkdir", n.mkdir("e"))
	testkit.MustOK(t, "write", n.writeFile("e/x", []byte("x")))
	wantErrno(t, "rename a directory over a non-empty one", n.rename("d", "e", false), syscall.ENOTEMPTY)
	wantErrno(t, "rename a directory into itself", n.rename("d", "d/sub", false), syscall.EINVAL)
}

// TestNFSLargeWrite: a client that writes as much per WRITE as FSINFO
// allows (the Go client does) can write a file larger than one RPC
// record may be.
func TestNFSLargeWrite(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	b := testkit.StartNFS(t, c)
	n := nfsTarget{testkit.DialNFS(t, b.Addr)}
	data := testkit.SeededBytes(9<<20+3, 5)
	testkit.MustOK(t, "write 9 MiB", n.writeFile("big", data))
	got, err := n.readFile("big")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes (%v), want %d", len(got), err, len(data))
	}
}

// nfsCreate sends CREATE3 of dir/name with createmode how (0 UNCHECKED, 1
// GUARDED: no attributes set; 2 EXCLUSIVE with verf) and returns the new
// file's handle.
func nfsCreate(t *testing.T, tg *nfsc.Target, dirFH []byte, name string, how uint32, verf uint64) ([]byte, error) {
	t.Helper()
	var res io.ReadSeeker
	var err error
	if how == 2 {
		res, err = tg.Call(&struct {
			rpc.Header
			Dir  []byte
			Name string
			How  uint32
			Verf uint64
		}{nfsHeader(8), dirFH, name, how, verf})
	} else {
		// sattr3 with nothing set: mode, uid, gid, size (bools), atime, mtime (DONT_CHANGE).
		res, err = tg.Call(&struct {
			rpc.Header
			Dir   []byte
			Name  string
			How   uint32
			Sattr [6]uint32
		}{nfsHeader(8), dirFH, name, how, [6]uint32{}})
	}
	if err != nil {
		t.Fatalf("CREATE: %v", err)
	}
	if err := nfsStatusErr(res); err != nil {
		return nil, err
	}
	var body struct {
		HandleFollows uint32
		FH            []byte
	}
	if err := xdr.Read(res, &body); err != nil {
		t.Fatalf("CREATE reply: %v", err)
	}
	return body.FH, nil
}

// TestNFSCreateModes: an UNCHECKED create of an existing file keeps its
// data (go-nfs truncated it: libnfs's open with O_CREAT|O_APPEND lost the
// file), GUARDED refuses it, EXCLUSIVE creates once and accepts its own
// retransmission; SETATTR keeps the sticky bit.
func TestNFSCreateModes(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	b := testkit.StartNFS(t, c)
	n := nfsTarget{testkit.DialNFS(t, b.Addr)}
	testkit.MustOK(t, "mkdir", n.mkdir("d"))
	testkit.MustOK(t, "write", n.writeFile("d/f", []byte("keep me")))
	_, dfh, err := n.tg.Lookup("/d")
	testkit.MustOK(t, "lookup", err)
	_, ffh, err := n.tg.Lookup("/d/f")
	testkit.MustOK(t, "lookup", err)

	fh, err := nfsCreate(t, n.tg, dfh, "f", 0, 0)
	testkit.MustOK(t, "UNCHECKED create of an existing file", err)
	if !bytes.Equal(fh, ffh) {
		t.Fatal("UNCHECKED create answered another file's handle")
	}
	if got, err := n.readFile("d/f"); err != nil || string(got) != "keep me" {
		t.Fatalf("after an UNCHECKED create of an existing file it holds %q (%v)", got, err)
	}
	_, err = nfsCreate(t, n.tg, dfh, "f", 1, 0)
	wantErrno(t, "GUARDED create of an existing file", nfsErrno(err), syscall.EEXIST)

	efh, err := nfsCreate(t, n.tg, dfh, "x", 2, 0x1122334455667788)
	testkit.MustOK(t, "EXCLUSIVE create", err)
	again, err := nfsCreate(t, n.tg, dfh, "x", 2, 0x1122334455667788)
	testkit.MustOK(t, "EXCLUSIVE create retransmitted", err)
	if !bytes.Equal(efh, again) {
		t.Fatal("the retransmitted EXCLUSIVE create answered another handle")
	}
	_, err = nfsCreate(t, n.tg, dfh, "x", 2, 99)
	wantErrno(t, "EXCLUSIVE create with another verifier", nfsErrno(err), syscall.EEXIST)

	testkit.MustOK(t, "chmod 1777", n.chmod("d", 0o1777))
	if st, err := n.stat("d"); err != nil || st.perm != 0o1777 {
		t.Fatalf("mode after SETATTR 01777: %o (%v)", st.perm, err)
	}
}

// TestNFSMalformedCalls: calls go-nfs would stall on (it stops reading a
// connection without closing it) are answered, or the connection is
// closed; the bridge goes on serving.
func TestNFSMalformedCalls(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	b := testkit.StartNFS(t, c)
	record := func(words ...uint32) []byte {
		out := binary.BigEndian.AppendUint32(nil, uint32(4*len(words))|1<<31)
		for _, w := range words {
			out = binary.BigEndian.AppendUint32(out, w)
		}
		return out
	}
	exchange := func(rec []byte) ([]byte, error) {
		conn, err := net.DialTimeout("tcp", b.Addr, 5*time.Second)
		testkit.MustOK(t, "dial", err)
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(20 * time.Second)) // a stall fails the test instead of hanging it
		if _, err := conn.Write(rec); err != nil {
			return nil, err
		}
		var hdr [4]byte
		if _, err := io.ReadFull(conn, hdr[:]); err != nil {
			return nil, err
		}
		body := make([]byte, binary.BigEndian.Uint32(hdr[:])&^(1<<31))
		_, err = io.ReadFull(conn, body)
		return body, err
	}
	// RPC version 3: MSG_DENIED, RPC_MISMATCH.
	body, err := exchange(record(7, 0, 3, 100003, 3, 0, 0, 0, 0, 0))
	if err != nil || len(body) < 16 || binary.BigEndian.Uint32(body[0:]) != 7 || binary.BigEndian.Uint32(body[8:]) != 1 || binary.BigEndian.Uint32(body[12:]) != 0 {
		t.Fatalf("RPC version 3 call: reply %x, %v; want MSG_DENIED RPC_MISMATCH for xid 7", body, err)
	}
	// A truncated call header: GARBAGE_ARGS.
	body, err = exchange(record(8, 0, 2, 100003, 3, 1, 0, 1000))
	if err != nil || len(body) < 24 || binary.BigEndian.Uint32(body[20:]) != 4 {
		t.Fatalf("truncated call: reply %x, %v; want GARBAGE_ARGS", body, err)
	}
	// A reply sent to the server: the connection is closed, not left open.
	if _, err := exchange(record(9, 1, 0, 0)); err == nil {
		t.Fatal("a non-call record got an answer")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("a non-call record left the connection open and silent")
	}
	// Still serving.
	n := nfsTarget{testkit.DialNFS(t, b.Addr)}
	testkit.MustOK(t, "mkdir after malformed calls", n.mkdir("ok"))
}

// TestNFSLostUnstableWritesChangeVerifier: when the bridge cannot commit
// writes it answered UNSTABLE (another client committed the file first:
// first committer wins), it changes its write verifier, so the NFS client
// sees another verifier at COMMIT and sends its writes again instead of
// taking them as committed.
func TestNFSLostUnstableWritesChangeVerifier(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	b := testkit.StartNFS(t, c)
	n := nfsTarget{testkit.DialNFS(t, b.Addr)}
	testkit.MustOK(t, "create", n.writeFile("f", []byte("0123456789")))
	testkit.MustOK(t, "create", n.writeFile("g", []byte("-")))
	_, ffh, err := n.tg.Lookup("/f")
	testkit.MustOK(t, "lookup", err)
	_, gfh, err := n.tg.Lookup("/g")
	testkit.MustOK(t, "lookup", err)
	r, err := nfsWrite(t, n.tg, ffh, 0, []byte("nfs"), 0)
	testkit.MustOK(t, "unstable write", err)
	// Another client changes the file and commits first.
	overwriteCommitted(t, c, "/f", []byte("other client"))
	// The bridge commits f once it has been idle for a second; its commit
	// fails, and the verifier must change. Poll with writes to g.
	deadline := time.Now().Add(20 * time.Second)
	for {
		r2, err := nfsWrite(t, n.tg, gfh, 0, []byte("+"), 0)
		testkit.MustOK(t, "unstable write to g", err)
		if r2.verf != r.verf {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the bridge lost writes it answered UNSTABLE and kept its write verifier: the client would not resend them")
		}
		time.Sleep(100 * time.Millisecond) // polling for the idle commit, not a synchronisation by time
	}
	if got, err := n.readFile("f"); err != nil || string(got) != "other client" { // 12 bytes over the 10
		t.Fatalf("f holds %q (%v): the other client committed first", got, err)
	}
}

// TestNFSReadSeesOtherClientsCommits: a client that keeps reading a file
// through the bridge (so the bridge never closes it for idleness) sees
// another client's commit to it within the attribute cache's time.
func TestNFSReadSeesOtherClientsCommits(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	b := testkit.StartNFS(t, c)
	n := nfsTarget{testkit.DialNFS(t, b.Addr)}
	testkit.MustOK(t, "create", n.writeFile("f", []byte("version one")))
	if got, err := n.readFile("f"); err != nil || string(got) != "version one" {
		t.Fatalf("read %q (%v)", got, err)
	}
	overwriteCommitted(t, c, "/f", []byte("VERSION TWO"))
	deadline := time.Now().Add(20 * time.Second)
	for {
		got, err := n.readFile("f")
		testkit.MustOK(t, "read", err)
		if string(got) == "VERSION TWO" {
			return
		}
		if string(got) != "version one" {
			t.Fatalf("read %q: neither version", got)
		}
		if time.Now().After(deadline) {
			t.Fatal("a client reading the file every 100 ms never sees another client's commit")
		}
		time.Sleep(100 * time.Millisecond) // a polling reader, below the bridge's idle time
	}
}

// overwriteCommitted writes data at the start of the existing file p as
// another PlasmaFS client, in one committed transaction.
func overwriteCommitted(t *testing.T, c *clustertest.Procs, p string, data []byte) {
	t.Helper()
	cl := c.Client(client.Config{})
	defer cl.Close()
	ctx := context.Background()
	tx := cl.Begin()
	f, err := tx.Open(ctx, p)
	testkit.MustOK(t, "open", err)
	_, err = f.WriteAt(data, 0)
	testkit.MustOK(t, "write", err)
	testkit.MustOK(t, "close", f.Close())
	testkit.MustOK(t, "commit", tx.Commit(ctx))
}
