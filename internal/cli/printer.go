package cli

import (
	"encoding/json"
	"io"
)

// printer writes what a command found, in one of two forms chosen by the
// command's -json flag: text for people, or JSON for scripts (one object
// per line, JSON Lines, so a listing can be streamed). The JSON field
// names are part of the CLI's interface: keep them stable.
type printer struct {
	w    io.Writer
	json *bool
}

// newPrinter adds -json to f and returns the printer it selects.
func newPrinter(f *flags, what string) *printer {
	return &printer{w: stdout, json: f.Bool("json", false, what)}
}

// JSON reports whether the JSON form was asked for.
func (p *printer) JSON() bool { return *p.json }

// item prints one result: v as a JSON line, or text(w) as text.
func (p *printer) item(v any, text func(w io.Writer)) error {
	if *p.json {
		enc := json.NewEncoder(p.w)
		enc.SetEscapeHTML(false) // names as they are: <, > and & stay
		return enc.Encode(v)
	}
	text(p.w)
	return nil
}
