// Package mount tests the FUSE mount against real processes: file operations,
// ctime, ownership, special files, stacked mounts, power cuts, namenode
// restarts, and the fsx random-operation exerciser.
package mount
