package auth

import (
	"testing"
	"time"
)

func FuzzOpenTicket(f *testing.F) {
	key := []byte("0123456789abcdef0123456789abcdef")
	f.Add((&Ticket{Tag: 1, Node: 2, Start: 3, Count: 4, Write: true, Expiry: 5}).Seal(key))
	f.Add((&Ticket{Tag: 1, Node: 2, Start: 3, Count: 4, Expiry: 5, Gen: 6 << 32}).Seal(key))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		tk, err := OpenTicket(key, b)
		if err != nil {
			return
		}
		// Only a correctly sealed ticket opens; it re-seals identically.
		if string(tk.Seal(key)) != string(b) {
			t.Fatalf("ticket opened but does not re-seal to the same bytes")
		}
		tk.Check(2, 3, 1, false, time.Unix(0, 0))
	})
}

func FuzzParseCredential(f *testing.F) {
	f.Add([]byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		ParseCredential(b)
	})
}

func TestTicketChecks(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	now := time.Now()
	tk := &Ticket{Tag: 9, Node: 1, Start: 100, Count: 10, Write: false, Expiry: now.Add(time.Minute).Unix()}
	got, err := OpenTicket(key, tk.Seal(key))
	if err != nil || *got != *tk {
		t.Fatalf("round trip: %v %+v", err, got)
	}
	if err := got.Check(1, 105, 5, false, now); err != nil {
		t.Fatalf("in range: %v", err)
	}
	for _, c := range []struct {
		node         uint32
		block, count uint64
		write        bool
		at           time.Time
	}{{2, 105, 1, false, now}, {1, 99, 1, false, now}, {1, 105, 6, false, now}, {1, 105, 1, true, now}, {1, 105, 1, false, now.Add(2 * time.Minute)}} {
		if err := got.Check(c.node, c.block, c.count, c.write, c.at); err == nil {
			t.Errorf("check %+v passed", c)
		}
	}
	if _, err := OpenTicket([]byte("another key.....another key....."), tk.Seal(key)); err == nil {
		t.Fatal("ticket opened with the wrong key")
	}
}
