package mrexec

import (
	"bytes"
	"strings"
	"testing"
)

func TestFormatOfName(t *testing.T) {
	for name, want := range map[string]string{"a.txt": "text", "a": "text", "x.var": ".var", "d/x.fixed100": ".fixed100"} {
		f, err := FormatOfName(name)
		if err != nil || f.String() != want {
			t.Errorf("FormatOfName(%q) = %v, %v; want %s", name, f, err, want)
		}
	}
	for _, name := range []string{"x.fixed", "x.fixed0", "x.fixedabc"} {
		if _, err := FormatOfName(name); err == nil {
			t.Errorf("FormatOfName(%q): no error", name)
		}
	}
}

func TestConvertRefusesWhatTheTargetCannotHold(t *testing.T) {
	text, fixed3, v := RecordFormat{Kind: FormatLines}, RecordFormat{Kind: FormatFixed, Size: 3}, RecordFormat{Kind: FormatLengthPrefixed}
	var out bytes.Buffer
	if _, err := Convert(strings.NewReader("abc\nde\n"), text, &out, fixed3); err == nil || !strings.Contains(err.Error(), "record 2") {
		t.Errorf("short line to .fixed3: %v", err)
	}
	out.Reset()
	if _, err := Convert(strings.NewReader("\x00\x00\x00\x02a\n"), v, &out, text); err == nil || !strings.Contains(err.Error(), "newline") {
		t.Errorf("record with a newline to text: %v", err)
	}
	if _, err := Convert(strings.NewReader("abcd"), fixed3, &out, v); err == nil || !strings.Contains(err.Error(), "partial record") {
		t.Errorf("partial fixed record: %v", err)
	}
	if _, err := Convert(strings.NewReader("\x00\x00\x00\x09ab"), v, &out, text); err == nil {
		t.Error("truncated .var record: no error")
	}
	out.Reset()
	if n, err := Convert(strings.NewReader("abcdef"), fixed3, &out, v); err != nil || n != 2 || out.String() != "\x00\x00\x00\x03abc\x00\x00\x00\x03def" {
		t.Errorf(".fixed3 to .var: %d %v %q", n, err, out.String())
	}
}
