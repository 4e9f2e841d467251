// Package powercut tests durability across power cuts, killed datanodes and
// namenode restarts: what was acknowledged survives and fsck is clean.
package powercut
