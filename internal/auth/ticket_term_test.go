package auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"testing"
	"time"
)

// A ticket's term is sealed with it; a ticket of the form before terms
// (no Term field, MACed as such) is refused.
func TestTicketTerm(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	tk := &Ticket{Tag: 3, Node: 4, Start: 5, Count: 1, Write: true, Expiry: time.Now().Add(time.Hour).Unix(), Gen: 7, Seq: 7, Term: 9}
	b := tk.Seal(key)
	got, err := OpenTicket(key, b)
	if err != nil || got.Term != 9 || got.Seq != 7 {
		t.Fatalf("sealed with term 9: %+v %v", got, err)
	}
	for i := 69; i < 77; i++ {
		f := append([]byte(nil), b...)
		f[i] ^= 0x80
		if _, err := OpenTicket(key, f); err != ErrTicketForged {
			t.Errorf("term byte %d changed after sealing: %v", i, err)
		}
	}
	old := append([]byte(nil), tk.body()[:ticketLen-16-8]...)
	m := hmac.New(sha256.New, key)
	m.Write(old)
	old = m.Sum(old)[:ticketLen-8]
	if _, err := OpenTicket(key, old); err != ErrTicketForged {
		t.Fatalf("ticket of the form before terms: %v", err)
	}
}
