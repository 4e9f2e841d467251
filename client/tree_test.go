package client

import "testing"

func TestSplitTree(t *testing.T) {
	for _, c := range []struct {
		arg   string
		local bool
		path  string
		bad   bool
	}{
		{"/a/b", false, "/a/b", false},
		{"file::/tmp/x", true, "/tmp/x", false},
		{"file::rel/x", true, "rel/x", false},
		{"plasma::/x", false, "/x", false},
		{"/a::b", false, "/a::b", false},
		{"file::", false, "", true},
		{"ssh::/x", false, "", true},
	} {
		local, p, err := SplitTree(c.arg)
		if (err != nil) != c.bad || local != c.local || p != c.path {
			t.Errorf("SplitTree(%q) = %v, %q, %v; want %v, %q, error %v", c.arg, local, p, err, c.local, c.path, c.bad)
		}
	}
}
