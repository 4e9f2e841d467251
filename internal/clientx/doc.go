// Package clientx is the client library's machinery for this module's
// frontends and tools: the FUSE mount and the NFS bridge (through
// internal/vfs), the WebHDFS gateway, the CLI, the benchmarks and the
// integration tests. Users of the library do not need it, so it is not
// part of package client's API:
//
//   - At(tx): operations addressed by directory inode and name, the way
//     FUSE and NFS address files (LookupAt, CreateAt, RenameAt, ReadDirPage,
//     PathOf, …), and CreateAs for a gateway creating on a user's behalf;
//   - Auto: compound transactions whose first request also commits;
//   - directory leases (LeaseDir, LeaseValid);
//   - the namenode's counters and the connection's state (NamenodeStats,
//     NamenodeRequests, NamenodeAddr, Lost);
//   - tuning knobs (SetFlushBlocks);
//   - reads without a copy, for the FUSE mount's replies (ReadAtShared).
//
// It works on the client's unexported state through internal/clientlink
// (package client cannot import this one, which names its types).
package clientx
