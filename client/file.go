package client

import (
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/plasmafs/plasma/internal/wire"
)

// File is an open regular file within a transaction. It implements
// io.Reader, io.ReaderAt, io.Writer, io.WriterAt, io.Seeker and
// io.WriterTo. Writes are buffered in whole blocks and sent to the
// datanodes when enough have accumulated, on Flush, Close or Commit; they
// become visible to others when the transaction commits. Blocks are never
// overwritten in place: a write goes to newly allocated blocks, so readers
// of the previous version are unaffected.
//
// A File reads exactly one committed version (plus its own transaction's
// writes): the size and the block list come from the namenode together.
// ReadAt may be called from several goroutines at once; the other methods
// are serialised.
//
// A File uses the context it was opened with for its io methods.
type File struct {
	*fileState
	pos int64 // of Read, Write and Seek
	r   *blockReader
	w   *blockWriter
}

// fileState is what a File, its reader and its writer share.
type fileState struct {
	tx   *Txn
	ctx  context.Context
	path string
	ino  uint64
	bs   int

	mu     sync.Mutex // guards the file: everything below, the position, the reader's and the writer's state
	size   int64
	closed bool
}

// Open opens an existing regular file for reading and writing. Its size
// and block list are those of one committed version.
func (tx *Txn) Open(ctx context.Context, path string) (*File, error) {
	r, err := tx.call(ctx, &wire.Request{Op: wire.OpLookup, Path: path, Flags: wire.FlagBlocks})
	if err != nil {
		return nil, err
	}
	return tx.openResp(ctx, path, r)
}

// OpenInode opens the regular file with inode number ino.
func (tx *Txn) OpenInode(ctx context.Context, ino uint64) (*File, error) {
	r, err := tx.call(ctx, &wire.Request{Op: wire.OpStat, Ino: ino, Flags: wire.FlagBlocks})
	if err != nil {
		return nil, err
	}
	return tx.openResp(ctx, fmt.Sprintf("inode %d", ino), r)
}

func (tx *Txn) openResp(ctx context.Context, path string, r *wire.Response) (*File, error) {
	f, err := tx.openInfo(ctx, path, infoOf(r.Attr))
	if err != nil {
		return nil, err
	}
	if len(r.Counters) > 0 && r.Counters[0] == wire.BlocksIncluded {
		f.r.setBlocks(r.Extents)
	}
	return f, nil
}

// CreateFile creates a new file and opens it.
func (tx *Txn) CreateFile(ctx context.Context, path string, opt CreateOptions) (*File, error) {
	fi, err := tx.Create(ctx, path, opt)
	if err != nil {
		return nil, err
	}
	return tx.openInfo(ctx, path, fi)
}

func (tx *Txn) openInfo(ctx context.Context, path string, fi FileInfo) (*File, error) {
	switch fi.Type {
	case TypeDir:
		return nil, &Error{Code: ErrorCode(wire.ErrCodeIsDir), Msg: path + ": is a directory"}
	case TypeFile:
	default:
		return nil, &Error{Code: ErrorCode(wire.ErrCodeInvalid), Msg: path + ": not a regular file"}
	}
	st := &fileState{tx: tx, ctx: ctx, path: path, ino: fi.Ino, bs: fi.Blocksize, size: fi.Size}
	r := &blockReader{fileState: st}
	r.w = newBlockWriter(st, r)
	f := &File{fileState: st, r: r, w: r.w}
	tx.mu.Lock()
	tx.files = append(tx.files, f)
	tx.mu.Unlock()
	return f, nil
}

// Ino returns the file's inode number.
func (f *File) Ino() uint64 { return f.ino }

// Size returns the file size as this transaction sees it.
func (f *File) Size() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.size
}

// Name returns the path the file was opened with.
func (f *File) Name() string { return f.path }

// ReadAt implements io.ReaderAt; it is safe for concurrent use.
func (f *File) ReadAt(p []byte, off int64) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.r.readAt(p, off, nil)
}

// readAtShared reads like ReadAt, but the bytes that lie in a block the
// file holds in memory (cached or read ahead, checked against its
// checksum) are not copied into p: it returns them as slices of that
// block; the rest it reads into p and returns as slices of p. The slices,
// in file order, hold the n bytes read. Until release is called (exactly
// once, after the slices were last used) the blocks stay as they are: not
// reused for another block however many reads follow. On an error other
// than io.EOF it returns no slices (clientx.ReadAtShared, the FUSE mount's
// READ replies).
func (f *File) readAtShared(p []byte, off int64) (bufs [][]byte, n int, release func(), err error) {
	v := &readViews{}
	f.mu.Lock()
	n, err = f.r.readAt(p, off, v)
	f.mu.Unlock()
	if err != nil && err != io.EOF {
		v.release()
		return nil, n, func() {}, err
	}
	return v.bufs, n, v.release, err
}

// Read implements io.Reader.
func (f *File) Read(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, err := f.r.readAt(p, f.pos, nil)
	f.pos += int64(n)
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

// Seek implements io.Seeker.
func (f *File) Seek(offset int64, whence int) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += f.pos
	case io.SeekEnd:
		offset += f.size
	default:
		return 0, fmt.Errorf("%s: bad whence %d", f.path, whence)
	}
	if offset < 0 {
		return 0, fmt.Errorf("%s: seek to negative offset", f.path)
	}
	f.pos = offset
	return offset, nil
}

// WriteTo streams the file from the current position to w, fetching
// 8 blocks in parallel (io.Copy uses it).
func (f *File) WriteTo(w io.Writer) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.r.writeTo(w, &f.pos, -1)
}

// WriteToN is WriteTo for at most n bytes from the current position: it
// fetches nothing past them, which matters for a range of a large file
// (WriteTo reads ahead up to eight blocks).
func (f *File) WriteToN(w io.Writer, n int64) (int64, error) {
	if n < 0 {
		return 0, fmt.Errorf("%s: negative length %d", f.path, n)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.r.writeTo(w, &f.pos, n)
}

// WriteAt implements io.WriterAt.
func (f *File) WriteAt(p []byte, off int64) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.w.writeAt(p, off)
}

// Write implements io.Writer.
func (f *File) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, err := f.w.writeAt(p, f.pos)
	f.pos += int64(n)
	return n, err
}

// appendBlock adds buf (a pooled block buffer holding n valid bytes) at
// the current position; the file takes ownership of buf. At the
// block-aligned end of the file it becomes the next block without a copy
// (CopyIn reads straight into it).
func (f *File) appendBlock(buf []byte, n int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return errEnded
	}
	if f.w.failed != nil {
		return f.w.failed
	}
	err := f.w.appendAt(buf, n, f.pos)
	f.pos += int64(n)
	return err
}

// Truncate changes the file size; blocks past the end are freed at commit.
func (f *File) Truncate(size int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return errEnded
	}
	if size < 0 {
		return fmt.Errorf("%s: negative size", f.path)
	}
	return f.w.truncate(size)
}

// Flush writes the buffered blocks to the datanodes and records them in
// the transaction. Data is durable only after Commit.
func (f *File) Flush(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.w.flush(ctx)
}

// abandon waits for the background write and makes the file unusable,
// dropping what is buffered (the transaction is being aborted).
func (f *File) abandon() {
	f.mu.Lock()
	f.w.drop()
	f.closed = true
	f.r.releaseBlocks()
	f.mu.Unlock()
	f.r.aheadWG.Wait()
}

// Close flushes buffered writes; the file is unusable afterwards.
func (f *File) Close() error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil
	}
	err := f.w.flush(f.ctx)
	f.closed = true
	f.r.releaseBlocks()
	f.mu.Unlock()
	f.r.aheadWG.Wait()
	f.tx.mu.Lock()
	for i, g := range f.tx.files {
		if g == f {
			f.tx.files = append(f.tx.files[:i], f.tx.files[i+1:]...)
			break
		}
	}
	f.tx.mu.Unlock()
	return err
}

var _ interface {
	io.ReadWriteSeeker
	io.ReaderAt
	io.WriterAt
	io.WriterTo
} = (*File)(nil)

// setFlushBlocks sets how many dirty blocks are buffered before they are
// written out (clientx.SetFlushBlocks).
func (f *File) setFlushBlocks(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.w.flushBlocks = n
}
