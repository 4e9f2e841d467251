package mapred

import "github.com/plasmafs/plasma/internal/mrexec"

// The values of a job's InputFormat and ExtractMode (the tasks, in
// internal/mrexec, read and cut the records).
const (
	FormatLines          = mrexec.FormatLines
	FormatFixed          = mrexec.FormatFixed
	FormatLengthPrefixed = mrexec.FormatLengthPrefixed
	// FormatAuto chooses each input file's format by its name, as the
	// original's auto_input_format did: .var length-prefixed, .fixed<n>
	// fixed of n bytes, other names lines.
	FormatAuto = mrexec.FormatAuto

	ExtractKeyTabValue     = mrexec.ExtractKeyTabValue
	ExtractKeyTabPartition = mrexec.ExtractKeyTabPartition
	ExtractKey             = mrexec.ExtractKey
)

// Partition is the default partitioner: FNV-1a of the key, modulo parts.
func Partition(key []byte, parts int) int { return mrexec.Partition(key, parts) }
