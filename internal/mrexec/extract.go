package mrexec

import (
	"bytes"
	"fmt"
	"strconv"
)

// Extract modes (Job.ExtractMode), the original streaming's extract_mode:
// how a map output line gives its key, which orders the lines, and its
// partition, which chooses the reduce task.
const (
	// ExtractKeyTabValue: the key is the line up to its first TAB (all of
	// a line without one); the partition is the key's hash. The default.
	ExtractKeyTabValue = "key_tab_value"
	// ExtractKeyTabPartition: "key TAB partition TAB value": the key as
	// above, the partition the decimal number after the first TAB,
	// chosen by the mapper. The line goes to the reducer whole.
	ExtractKeyTabPartition = "key_tab_partition_tab_value"
	// ExtractKey: the whole line is the key and its hash the partition.
	ExtractKey = "key"
)

// ValidExtractMode checks an extract mode ("" is the default).
func ValidExtractMode(m string) error {
	switch m {
	case "", ExtractKeyTabValue, ExtractKeyTabPartition, ExtractKey:
		return nil
	}
	return fmt.Errorf("extract_mode %q: must be %q, %q or %q", m, ExtractKeyTabValue, ExtractKeyTabPartition, ExtractKey)
}

// partitionOf returns the partition of map output line in extract mode
// mode, of parts partitions.
func partitionOf(mode string, line []byte, parts int) (int, error) {
	switch mode {
	case ExtractKeyTabPartition:
		_, rest, ok := bytes.Cut(line, []byte{'\t'})
		field, _, _ := bytes.Cut(rest, []byte{'\t'})
		p, err := strconv.Atoi(string(field))
		if !ok || err != nil || p < 0 || p >= parts {
			return 0, fmt.Errorf("map output line %.60q: extract_mode %s wants a key, a TAB, a partition number (0..%d), a TAB, then the value", line, ExtractKeyTabPartition, parts-1)
		}
		return p, nil
	case ExtractKey:
		return Partition(line, parts), nil
	}
	return Partition(keyOf(line), parts), nil
}
