package loopback

import "testing"

// TestFreeAddrNeverRepeats asks for more addresses than a random pick
// from the range would give without a repeat (birthday bound) and checks
// that none is handed out twice.
func TestFreeAddrNeverRepeats(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 2000; i++ {
		a, err := FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		if seen[a] {
			t.Fatalf("address %s handed out twice (after %d)", a, i)
		}
		seen[a] = true
	}
}
