// Package lossyfs is a FUSE filesystem for power-cut tests: a passthrough
// over a backing directory that keeps every data write in memory until the
// file is fsynced, so that a test can "cut the power" and lose exactly what
// a real machine could lose (the LazyFS model that etcd's end-to-end tests
// use).
//
// # Why it exists
//
// Killing a process with SIGKILL does not test durability: the data the
// process wrote is in the operating system's page cache and survives. A test
// suite that passes with kill -9 still passes with the datanode's fdatasync
// removed or SQLite at synchronous=OFF. Here, in contrast, the page cache is
// the FUSE server's memory: (*FS).Cut discards it and unmounts, and a new
// Mount over the same backing directory shows only what was fsynced.
//
// # Model
//
//   - Data operations are buffered per inode (in 4 KiB pages, with a pending
//     size): write, truncate (setattr size, open with O_TRUNC) and fallocate
//     (mode 0 extends the size; FALLOC_FL_KEEP_SIZE alone is accepted and
//     does nothing; other modes fail with EOPNOTSUPP). Reads see the merged
//     view: pending pages over the backing file, with everything the
//     pending size cut off reading as zeros, so a truncate followed by an
//     extension reads zeros.
//   - fsync and fdatasync of any descriptor of a file write all of that
//     file's pending data and size to the backing file (whichever
//     descriptor or process wrote it, as the kernel's page cache does).
//     The backing file is not fsynced itself: the backing directory plays
//     the disk, and the test process never loses power.
//   - Shared writable mmap works (files are not opened with direct_io; the
//     kernel writes dirty mapped pages back as ordinary writes), so SQLite's
//     WAL index (-shm) works. POSIX and flock locks are handled by the
//     kernel locally (the mount does not ask for lock forwarding), which is
//     right for processes on one machine.
//   - Metadata is not buffered. Namespace operations (create, mkdir, mknod,
//     rename, unlink, rmdir, symlink, link) and chmod, chown and utimes go
//     straight to the backing directory, as if every directory were
//     fsynced at once. This is a simplification: a program that
//     forgets to fsync a directory after creating or renaming a file is not
//     caught. A file created and renamed but never fsynced does lose its
//     content, though, which catches the classic write-rename-without-fsync
//     bug.
//   - syncfs(2) and sync(2) never reach a FUSE server (the kernel answers
//     them itself for /dev/fuse mounts), so they do not make anything
//     durable here; (*FS).Sync does what sync(1) would.
//   - O_TMPFILE and extended attributes are not supported; copy_file_range
//     is refused (the kernel falls back to read and write).
//   - The kernel's page cache of the mount is kept (files open with
//     FOPEN_KEEP_CACHE, and no invalidation when attributes change): every
//     change passes through it, so it always agrees with this server, and
//     invalidating it could let a read racing with a write cache old data.
//   - Cut unmounts; if files are still open it aborts the FUSE connection
//     through /sys/fs/fuse/connections (mounting fusectl there if needed)
//     and detaches the mount. A test process that dies without unmounting
//     leaves a stale mount: umount -l clears it.
//
// # Requirements
//
// Mounting needs root (the mount is made with mount(2) directly, so the
// fuse3 package and fusermount are not needed). The backing directory must
// be one filesystem. Processes that use the mount must not be the process
// that serves it when they mmap files: a page fault on the mount from the
// serving process can deadlock with the Go garbage collector. Tests start
// such programs (SQLite, the plasma daemons) as child processes.
package lossyfs
