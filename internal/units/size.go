// Package units parses and renders the byte counts that flags, job files
// and configuration take (65536, 64K, 1M, 4G…), so that every place that
// takes a size takes the same forms.
package units

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ParseSize parses sizes such as 1048576, 64K, 1M, 4G, 2T (binary units,
// either case, an optional B or iB after the unit: 64KiB, 1MB); a value
// that does not fit in 63 bits is refused, never wrapped.
func ParseSize(s string) (int64, error) {
	mult := int64(1)
	u := strings.ToUpper(strings.TrimSpace(s))
	if strings.HasSuffix(u, "IB") {
		u = u[:len(u)-2]
	} else {
		u = strings.TrimSuffix(u, "B")
	}
	if u != "" {
		switch u[len(u)-1] {
		case 'K':
			mult = 1 << 10
		case 'M':
			mult = 1 << 20
		case 'G':
			mult = 1 << 30
		case 'T':
			mult = 1 << 40
		case 'P':
			mult = 1 << 50
		case 'E':
			mult = 1 << 60
		}
		if mult != 1 {
			u = u[:len(u)-1]
		}
	}
	v, err := strconv.ParseInt(u, 10, 64)
	switch {
	case err != nil && errors.Is(err, strconv.ErrRange), err == nil && v > math.MaxInt64/mult:
		return 0, fmt.Errorf("size %q is too large", s)
	case err != nil:
		return 0, fmt.Errorf("bad size %q (use e.g. 65536, 64K, 1M, 4G)", s)
	case v < 0:
		return 0, fmt.Errorf("size %q is negative", s)
	}
	return v * mult, nil
}

// FormatSize renders n as ParseSize accepts it, with the largest unit
// that divides it.
func FormatSize(n int64) string {
	for _, u := range []struct {
		c     byte
		shift uint
	}{{'E', 60}, {'P', 50}, {'T', 40}, {'G', 30}, {'M', 20}, {'K', 10}} {
		if n != 0 && n%(1<<u.shift) == 0 {
			return strconv.FormatInt(n>>u.shift, 10) + string(u.c)
		}
	}
	return strconv.FormatInt(n, 10)
}
