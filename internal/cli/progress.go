package cli

import (
	"io"
	"os"

	"github.com/schollz/progressbar/v3"
)

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// progress is a byte progress bar on a terminal's stderr, and nothing
// otherwise.
type progress struct {
	bar *progressbar.ProgressBar
}

func newProgress(size int64, what string, quiet bool) *progress {
	if quiet || !isTerminal(os.Stderr) {
		return &progress{}
	}
	return &progress{bar: progressbar.DefaultBytes(size, what)}
}

func (p *progress) Write(b []byte) (int, error) {
	if p.bar != nil {
		p.bar.Add(len(b))
	}
	return len(b), nil
}

// finish completes the bar; later calls do nothing.
func (p *progress) finish() {
	if p.bar != nil {
		p.bar.Finish()
		io.WriteString(os.Stderr, "\n")
		p.bar = nil
	}
}
