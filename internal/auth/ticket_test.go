package auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"testing"
	"time"
)

// TestTicketGeneration: the generation round-trips, is covered by the MAC,
// and the expiry stays readable without the key.
func TestTicketGeneration(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	exp := time.Now().Add(time.Hour).Truncate(time.Second)
	tk := &Ticket{Tag: 3, Node: 4, Start: 5, Count: 6, Write: true, Expiry: exp.Unix(), Gen: 0x0123456789abcdef}
	b := tk.Seal(key)
	got, err := OpenTicket(key, b)
	if err != nil || *got != *tk {
		t.Fatalf("round trip: %v %+v", err, got)
	}
	if e, ok := TicketExpiry(b); !ok || !e.Equal(exp) {
		t.Fatalf("expiry %v %v, want %v", e, ok, exp)
	}
	// Every byte of the generation is covered: a holder cannot raise it.
	for i := 37; i < 45; i++ {
		f := append([]byte(nil), b...)
		f[i] ^= 0x80
		if _, err := OpenTicket(key, f); err != ErrTicketForged {
			t.Errorf("generation byte %d changed: %v", i, err)
		}
	}
	// A ticket of the former format (no generation) is refused.
	if _, err := OpenTicket(key, b[:len(b)-8]); err != ErrTicketForged {
		t.Errorf("short ticket: %v", err)
	}
	if _, ok := TicketExpiry(b[:len(b)-8]); ok {
		t.Error("expiry of a short ticket")
	}
}

// TestAppendTicket: an append ticket round-trips with its offset, allows
// writing from its offset on only, and neither reads nor writes blocks.
func TestAppendTicket(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	now := time.Now()
	tk := &Ticket{Tag: 3, Node: 4, Start: 5, Count: 1, Append: true, From: 40000, Expiry: now.Add(time.Hour).Unix(), Gen: 7}
	got, err := OpenTicket(key, tk.Seal(key))
	if err != nil || *got != *tk {
		t.Fatalf("round trip: %v %+v", err, got)
	}
	if err := got.CheckAppend(4, 5, 40000, now); err != nil {
		t.Errorf("append at the committed length: %v", err)
	}
	if err := got.CheckAppend(4, 5, 39999, now); !errors.Is(err, ErrTicketRange) {
		t.Errorf("append before the committed length: %v", err)
	}
	if err := got.CheckAppend(4, 6, 50000, now); !errors.Is(err, ErrTicketRange) {
		t.Errorf("append to another block: %v", err)
	}
	if err := got.CheckAppend(3, 5, 50000, now); !errors.Is(err, ErrTicketRange) {
		t.Errorf("append on another datanode: %v", err)
	}
	if err := got.Check(4, 5, 1, true, now); !errors.Is(err, ErrTicketRange) {
		t.Errorf("append ticket used to write a block: %v", err)
	}
	if err := got.Check(4, 5, 1, false, now); !errors.Is(err, ErrTicketRange) {
		t.Errorf("append ticket used to read a block: %v", err)
	}
	w := &Ticket{Tag: 3, Node: 4, Start: 5, Count: 1, Write: true, Expiry: now.Add(time.Hour).Unix(), Gen: 7}
	if err := w.CheckAppend(4, 5, 40000, now); !errors.Is(err, ErrTicketRange) {
		t.Errorf("write ticket used to extend: %v", err)
	}
	// The kind byte is covered by the MAC, and unknown kinds are refused.
	b := tk.Seal(key)
	b[28] = kindWrite
	if _, err := OpenTicket(key, b); err != ErrTicketForged {
		t.Errorf("append ticket turned into a write ticket: %v", err)
	}
	bad := &Ticket{Tag: 3, Node: 4, Start: 5, Count: 1, Expiry: now.Add(time.Hour).Unix()}
	b = bad.Seal(key)
	b[28] = 3
	m := hmac.New(sha256.New, key)
	m.Write(b[:ticketLen-16])
	copy(b[ticketLen-16:], m.Sum(nil)[:16])
	if _, err := OpenTicket(key, b); err != ErrTicketForged {
		t.Errorf("ticket of unknown kind: %v", err)
	}
}
