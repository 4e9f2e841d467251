package webhdfs

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/plasmafs/plasma/client"
)

func TestCleanPath(t *testing.T) {
	for in, want := range map[string]string{"": "/", "/": "/", "//a///b/": "/a/b", "/a b/ü": "/a b/ü"} {
		if got, err := cleanPath(in); err != nil || got != want {
			t.Errorf("cleanPath(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"/a/../b", "/.", "/a/./b", "/a\x00b"} {
		if _, err := cleanPath(in); remoteOf(err).exception != "IllegalArgumentException" {
			t.Errorf("cleanPath(%q): %v, want IllegalArgumentException", in, err)
		}
	}
}

func TestParams(t *testing.T) {
	q, err := parseParams("OP=open&Offset=5&recursive=TRUE&permission=1755")
	if err != nil {
		t.Fatal(err)
	}
	if q.get("op") != "open" {
		t.Errorf("parameter names are case insensitive: %v", q)
	}
	if n, err := q.intParam("offset", 0, 0, 10); n != 5 || err != nil {
		t.Errorf("offset: %d %v", n, err)
	}
	if _, err := q.intParam("offset", 0, 6, 10); err == nil {
		t.Error("offset out of range accepted")
	}
	if b, err := q.boolParam("recursive", false); !b || err != nil {
		t.Errorf("recursive: %v %v", b, err)
	}
	if m, err := q.permParam(0o644); m != 0o1755 || err != nil {
		t.Errorf("permission: %o %v", m, err)
	}
	for _, bad := range []string{"8", "2000", "-1", "rwx"} {
		q := params{"permission": bad}
		if _, err := q.permParam(0); err == nil {
			t.Errorf("permission %q accepted", bad)
		}
	}
}

func TestCallerMay(t *testing.T) {
	a := client.FileInfo{User: "bob", Group: "staff", Mode: 0o640}
	for _, tc := range []struct {
		c    caller
		want uint32
		ok   bool
	}{
		{caller{user: "bob"}, permRead | permWrite, true},
		{caller{user: "alice", groups: []string{"staff"}}, permRead, true},
		{caller{user: "alice", groups: []string{"staff"}}, permWrite, false},
		{caller{user: "carol", groups: []string{"carol"}}, permRead, false},
		{caller{user: "root"}, permRead, false},
		{caller{user: "admin", super: true}, permWrite | permSearch, true},
	} {
		if got := tc.c.may(a, tc.want); got != tc.ok {
			t.Errorf("%+v may %o on bob:staff 0640: %v, want %v", tc.c, tc.want, got, tc.ok)
		}
	}
}

func TestRemoteOf(t *testing.T) {
	for _, tc := range []struct {
		err    error
		exc    string
		status int
	}{
		{fmt.Errorf("/x: %w", client.ErrNotFound), "FileNotFoundException", 404},
		{fmt.Errorf("/x: %w", client.ErrPermission), "AccessControlException", 403},
		{fmt.Errorf("/x: %w", client.ErrExists), "FileAlreadyExistsException", 403},
		{fmt.Errorf("/x: %w", client.ErrInvalid), "IllegalArgumentException", 400},
		{missingf("gone"), "FileNotFoundException", 404},
		{errors.New("boom"), "IOException", 500},
	} {
		re := remoteOf(tc.err)
		if re.exception != tc.exc || re.status != tc.status {
			t.Errorf("remoteOf(%v) = %s %d, want %s %d", tc.err, re.exception, re.status, tc.exc, tc.status)
		}
	}
	if !errors.Is(missingf("gone"), client.ErrNotFound) {
		t.Error("missingf does not match client.ErrNotFound")
	}
}

// The checksum does not depend on how the data is cut into writes.
func TestMD5MD5CRCWrites(t *testing.T) {
	data := make([]byte, 3*4096+700)
	for i := range data {
		data[i] = byte(i * 7)
	}
	one := newMD5MD5CRC(4096)
	one.Write(data)
	want := one.sum()
	for _, step := range []int{1, 511, 512, 513, 4095, 5000} {
		m := newMD5MD5CRC(4096)
		for off := 0; off < len(data); off += step {
			m.Write(data[off:min(off+step, len(data))])
		}
		if got := m.sum(); !bytes.Equal(got, want) {
			t.Errorf("writes of %d bytes: %x, want %x", step, got, want)
		}
	}
}
