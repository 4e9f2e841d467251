package security

import (
	"bytes"
	"context"
	"io/fs"
	"testing"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/internal/wire"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestEmptyBlockAfterRestart: an empty block (DataWrite Length 0) reads as
// zeros, also after the datanode restarts (it failed its checksum then).
func TestEmptyBlockAfterRestart(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 1})
	r := newRawDN(t, c, c.DNs[0])
	old := testkit.RandomBytes(t, r.bs)
	if resp := r.write(3000, 5, uint32(r.bs), old, testkit.CRC32C(old)); resp.Status != wire.OK {
		t.Fatal(resp.Msg)
	}
	if resp := r.write(3000, 6, 0, nil, testkit.BlockCRC(nil, r.bs)); resp.Status != wire.OK {
		t.Fatalf("empty write refused: %s", resp.Msg)
	}
	if got, msg := r.read(3000, 6); !bytes.Equal(got, make([]byte, r.bs)) {
		t.Fatalf("empty block before a restart: %s", msg)
	}
	r.sync()
	c.Kill(c.DNs[0])
	c.StartDatanode(c.DNs[0])
	c.WaitLive(1)
	if got, msg := r.read(3000, 6); !bytes.Equal(got, make([]byte, r.bs)) {
		t.Fatalf("empty block after a restart: %s", msg)
	}
}

// TestSetgidForeignGroup: a user creating in a setgid directory of a group
// she is not in gets no setgid file of that group (Linux clears S_ISGID),
// and cannot chmod g+s it afterwards.
func TestSetgidForeignGroup(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 1})
	ctx := context.Background()
	admin := c.Client(client.Config{})
	defer admin.Close()
	testkit.MustOK(t, "setup", admin.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
		fi, err := tx.Mkdir(ctx, "/sg", 0o777)
		if err != nil {
			return err
		}
		m, g := fs.FileMode(0o777)|fs.ModeSetgid, "staff"
		_, err = tx.SetAttr(ctx, fi.Ino, client.SetAttr{Mode: &m, Group: &g})
		return err
	}))
	alice := c.Client(client.Config{CredentialFile: c.IssueCredential("alice", auth.RoleUser)})
	defer alice.Close()
	testkit.MustOK(t, "alice", alice.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
		fi, err := tx.Create(ctx, "/sg/x", client.CreateOptions{Mode: 0o755 | fs.ModeSetgid})
		if err != nil {
			return err
		}
		if fi.Group == "staff" && fi.Mode&fs.ModeSetgid != 0 {
			t.Errorf("alice (not in staff) created /sg/x setgid of group staff: %v", fi.Mode)
		}
		y, err := tx.Create(ctx, "/sg/y", client.CreateOptions{Mode: 0o755})
		if err != nil {
			return err
		}
		m := fs.FileMode(0o755) | fs.ModeSetgid
		fi, err = tx.SetAttr(ctx, y.Ino, client.SetAttr{Mode: &m})
		if err == nil && fi.Group == "staff" && fi.Mode&fs.ModeSetgid != 0 {
			t.Errorf("alice (not in staff) made /sg/y (group staff) setgid with chmod: %v", fi.Mode)
		}
		return nil
	}))
}
