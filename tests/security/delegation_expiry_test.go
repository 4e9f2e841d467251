package security

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/clustertest"
)

// TestDelegationExpiresOnOpenConnection: a delegated credential (a job's,
// valid for its lifetime only) stops working when it expires, also on a
// connection to the namenode that it opened while it was valid: the
// handshake is where certificates are checked, and a task (or whoever
// took its credential) that keeps its connection open must not keep the
// user's rights past the end the namenode signed.
func TestDelegationExpiresOnOpenConnection(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	ctx := context.Background()
	c.MustRun("mkdir", "/alice")
	c.MustRun("chown", "alice", "/alice")
	alice := c.Client(client.Config{CredentialFile: c.IssueCredential("alice", auth.RoleUser)})
	defer alice.Close()

	// Long enough to connect and be served on a loaded machine (longer
	// each time it was not); the certificate's end is whole seconds.
	var cred *auth.Credential
	var dc *client.Client
	for lifetime := 8 * time.Second; ; lifetime *= 2 {
		var err error
		if cred, err = alice.Delegate(ctx, "job-expiring", lifetime); err != nil {
			t.Fatal(err)
		}
		dc = c.Client(client.Config{Credential: cred})
		defer dc.Close()
		if _, err := dc.Lookup(ctx, "/alice"); err != nil {
			t.Fatalf("lookup with a delegated credential valid for %s: %v", lifetime, err)
		}
		if time.Now().Before(cred.Expires()) {
			break
		}
		if lifetime > 2*time.Minute {
			t.Fatalf("a delegated credential valid for %s expired before its first lookup was answered", lifetime)
		}
	}
	// Wait for the wall clock to pass the credential's end.
	for time.Now().Before(cred.Expires().Add(time.Second)) {
		time.Sleep(100 * time.Millisecond)
	}
	_, err := dc.Lookup(ctx, "/alice")
	if err == nil {
		t.Fatalf("a delegated credential that expired at %s is still served on its open connection", cred.Expires().Format(time.TimeOnly))
	}
	if !strings.Contains(err.Error(), "expired") {
		t.Errorf("the refusal does not say the credential expired: %v", err)
	}
	t.Logf("after expiry: %v", err)
	if err := dc.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
		_, err := tx.Create(ctx, "/alice/late", client.CreateOptions{})
		return err
	}); err == nil {
		t.Errorf("an expired delegated credential created a file")
	}
}
