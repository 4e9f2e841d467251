package units

import "testing"

// TestParseSize: the forms flags and job files took before they shared
// this parser (cli: B and iB suffixes, P and E; job files: lowercase
// units, surrounding spaces) all parse; negative, overflowing and
// malformed sizes are refused.
func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{
		"65536": 65536, "64K": 64 << 10, "64k": 64 << 10, "1M": 1 << 20, "1m": 1 << 20, "4G": 4 << 30, "2T": 2 << 40,
		"1P": 1 << 50, "7E": 7 << 60, "64KiB": 64 << 10, "1MB": 1 << 20, " 16K ": 16 << 10, "0": 0,
	} {
		got, err := ParseSize(in)
		if err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "K", "-1", "1X", "8E", "9223372036854775808", "1.5M", "64 K"} {
		if n, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) = %d, want an error", in, n)
		}
	}
	for _, n := range []int64{0, 1, 1023, 1 << 10, 3 << 20, 1 << 30, 5 << 40} {
		if back, err := ParseSize(FormatSize(n)); err != nil || back != n {
			t.Errorf("FormatSize(%d) = %q parses to %d, %v", n, FormatSize(n), back, err)
		}
	}
}
