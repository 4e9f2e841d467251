package testkit

import (
	"os"
	"strings"
	"testing"
	"time"
)

// WaitUnavailableRefusal waits until the namenode log at path, from byte
// from on, records a request refused for want of live datanodes (code
// unavailable), while the writer whose outcome done delivers is still at
// work. It fails the test if the writer ends first (its error says why)
// or nothing is refused within a minute.
func WaitUnavailableRefusal(t *testing.T, path string, from int, done <-chan error) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-done:
			t.Fatalf("the writer ended while no datanode could register: %v", err)
		default:
		}
		b, _ := os.ReadFile(path)
		if from > len(b) {
			from = 0
		}
		for _, line := range strings.Split(string(b[from:]), "\n") {
			if strings.Contains(line, "request refused") && strings.Contains(line, "code=unavailable") {
				return
			}
		}
		time.Sleep(20 * time.Millisecond) // polling a condition
	}
	t.Fatalf("%s records no request refused as unavailable after 60s", path)
}

// LogSize is the size of the log at path (0 if there is none yet).
func LogSize(path string) int {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return int(fi.Size())
}
