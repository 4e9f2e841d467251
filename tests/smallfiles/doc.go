// Package smallfiles tests that small files cost the datanodes what they
// hold (sparse volumes, internal/datanode/sparse.go, and the namenode's
// accounting in bytes, internal/namenode/space.go), against real processes
// on 127.0.0.1: a tree of many small files fits on volumes little larger
// than it and reads back; a full cluster refuses new blocks cleanly and
// says it is full; freed blocks give their space back; a datanode restart
// and a power cut keep what was committed.
package smallfiles
