// Package core tests the namespace and file basics against real processes on
// 127.0.0.1: files written and read back, block layout and CRCs, metadata
// files, huge directories, placement, operations by inode, shared
// connections, random requests and operations, and the commit log.
package core
