package webhdfs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clientx"
)

// ---- OPEN

// open streams a range of a file straight from the datanodes
// (client.File.WriteTo, which reads ahead), served at once rather than
// redirected, as Hadoop's HttpFS gateway does; Hadoop clients accept both.
func (g *Gateway) open(rq *request) error {
	off, err := rq.q.intParam("offset", 0, 0, math.MaxInt64)
	if err != nil {
		return err
	}
	length, err := rq.q.intParam("length", -1, 0, math.MaxInt64)
	if err != nil {
		return err
	}
	tx := g.c.Begin()
	defer tx.Abort(context.Background())
	f, err := openFile(rq.ctx, tx, rq, permRead)
	if err != nil {
		return err
	}
	size := f.Size()
	if off > size {
		return excEOF.errorf("Offset=%d out of the range [0, %d] of %s", off, size, rq.path)
	}
	n := size - off
	if length >= 0 && length < n {
		n = length
	}
	if length >= 0 && n > 0 {
		bs, err := g.blocksize(rq.ctx, tx, f)
		if err != nil {
			return err
		}
		if n <= int64(rangeReadAtBlocks*bs) {
			return g.sendRange(rq, f, off, n)
		}
	}
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return err
	}
	h := rq.w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Length", strconv.FormatInt(n, 10))
	rq.w.WriteHeader(http.StatusOK)
	if n == 0 {
		return nil
	}
	if _, err := f.WriteToN(g.stallGuard(rq.w), n); err != nil {
		// The status is sent: all the client can learn is a short body.
		g.opt.Log.Warn("webhdfs: read failed mid-stream", "path", rq.path, "offset", off, "error", err.Error())
		panic(http.ErrAbortHandler)
	}
	return nil
}

// openFile opens the regular file at rq.path in tx, once the caller is
// found to have permission perm on it.
func openFile(ctx context.Context, tx *client.Txn, rq *request, perm uint32) (*client.File, error) {
	l, err := locateFile(ctx, tx, rq.who, rq.path, perm)
	if err != nil {
		return nil, err
	}
	f, err := tx.OpenInode(ctx, l.fi.Ino)
	return f, wrapPath(rq.path, err)
}

// stallGuard returns a writer to the response that gives up on a client
// that takes more than the idle timeout to accept a write.
func (g *Gateway) stallGuard(w http.ResponseWriter) io.Writer {
	return &deadlineWriter{w: w, rc: http.NewResponseController(w), idle: g.opt.IdleTimeout}
}

type deadlineWriter struct {
	w    io.Writer
	rc   *http.ResponseController
	idle time.Duration
}

func (d *deadlineWriter) Write(p []byte) (int, error) {
	d.rc.SetWriteDeadline(time.Now().Add(d.idle))
	return d.w.Write(p)
}

// deadlineReader reads a request body, giving up on a client that sends
// nothing for the idle timeout.
type deadlineReader struct {
	r    io.Reader
	rc   *http.ResponseController
	idle time.Duration
}

func (d *deadlineReader) Read(p []byte) (int, error) {
	d.rc.SetReadDeadline(time.Now().Add(d.idle))
	return d.r.Read(p)
}

// ---- CREATE and APPEND

// redirect answers the first step of CREATE and APPEND: 307 to this
// gateway with data=true (Hadoop's HttpFS protocol), where the second
// request sends the data; with noredirect=true the location comes in a
// JSON body instead.
func (g *Gateway) redirect(rq *request) error {
	q := rq.r.URL.Query()
	q.Del("noredirect")
	q.Set("data", "true")
	scheme := "http"
	if rq.r.TLS != nil {
		scheme = "https"
	}
	loc := scheme + "://" + rq.r.Host + rq.r.URL.EscapedPath() + "?" + q.Encode()
	if nr, _ := rq.q.boolParam("noredirect", false); nr {
		writeJSON(rq.w, http.StatusOK, map[string]string{"Location": loc})
		return nil
	}
	rq.w.Header().Set("Location", loc)
	rq.w.Header().Set("Content-Length", "0")
	rq.w.WriteHeader(http.StatusTemporaryRedirect)
	return nil
}

type createParams struct {
	overwrite bool
	mode      uint32
	rep       int
}

func (rq *request) createParams() (createParams, error) {
	var cp createParams
	var err error
	if cp.overwrite, err = rq.q.boolParam("overwrite", false); err != nil {
		return cp, err
	}
	if cp.mode, err = rq.q.permParam(0o644); err != nil {
		return cp, err
	}
	rep, err := rq.q.intParam("replication", 0, 0, 16)
	cp.rep = int(rep)
	return cp, err
}

// create is CREATE: the first request is checked (so that a client learns
// of a refusal before it sends data) and redirected; the second streams
// its body into a new file, creating missing parent directories, in one
// transaction committed when the body is complete.
func (g *Gateway) create(rq *request) error {
	cp, err := rq.createParams()
	if err != nil {
		return err
	}
	if rq.path == "/" {
		return excExists.errorf("/ already exists as a directory")
	}
	data, err := rq.q.boolParam("data", false)
	if err != nil {
		return err
	}
	if !data {
		err := g.txn(rq, func(ctx context.Context, tx *client.Txn) error {
			l, err := locate(ctx, tx, rq.who, rq.path)
			if errors.Is(err, client.ErrNotFound) {
				return nil // missing parents are created by the upload
			}
			if err != nil {
				return err
			}
			_, err = replaceable(rq, l, cp)
			return err
		})
		if err != nil {
			return err
		}
		return g.redirect(rq)
	}
	if cp.rep, err = g.replication(rq.ctx, cp.rep); err != nil {
		return err
	}
	return g.upload(rq, http.StatusCreated, func(ctx context.Context, tx *client.Txn) (*client.File, error) {
		dir, err := mkdirs(ctx, tx, rq.who, path.Dir(rq.path), 0o755)
		if err != nil {
			return nil, err
		}
		l, err := locate(ctx, tx, rq.who, rq.path)
		if err != nil {
			return nil, err
		}
		old, err := replaceable(rq, l, cp)
		if err != nil {
			return nil, err
		}
		if old {
			if err := clientx.At(tx).UnlinkAt(ctx, dir.Ino, l.name); err != nil {
				return nil, wrapPath(rq.path, err)
			}
		}
		fi, err := clientx.At(tx).CreateAt(ctx, dir.Ino, l.name, client.CreateOptions{Mode: client.UnixMode(cp.mode), Rep: cp.rep})
		if err == nil && cp.mode == 0 {
			fi, err = zeroMode(ctx, tx, fi)
		}
		if err != nil {
			return nil, wrapPath(rq.path, err)
		}
		f, err := tx.OpenInode(ctx, fi.Ino)
		return f, wrapPath(rq.path, err)
	})
}

// replaceable checks that the caller may create the file l names: write
// and search permission on its directory and, if it exists, overwrite
// and the right to remove it (it must not be a directory). It reports
// whether a file is there to replace.
func replaceable(rq *request, l located, cp createParams) (bool, error) {
	if l.dir.Type != client.TypeDir {
		return false, excParentNotDir.errorf("%s: parent path %s is not a directory", rq.path, path.Dir(rq.path))
	}
	if err := need(rq.who, l.dir, permWrite|permSearch, path.Dir(rq.path)); err != nil {
		return false, err
	}
	if l.missing {
		return false, nil
	}
	if l.fi.Type == client.TypeDir {
		return false, excExists.errorf("%s already exists as a directory", rq.path)
	}
	if !cp.overwrite {
		return false, excExists.errorf("%s for client %s already exists", rq.path, rq.r.RemoteAddr)
	}
	return true, mayRemove(rq.who, l.dir, l.fi, path.Dir(rq.path), rq.path)
}

// appendFile is APPEND (POST): redirected first, then the body is added
// at the end of the file in one transaction.
func (g *Gateway) appendFile(rq *request) error {
	data, err := rq.q.boolParam("data", false)
	if err != nil {
		return err
	}
	openAppend := func(ctx context.Context, tx *client.Txn) (*client.File, error) {
		f, err := openFile(ctx, tx, rq, permWrite)
		if err != nil {
			return nil, err
		}
		_, err = f.Seek(0, io.SeekEnd)
		return f, err
	}
	if !data {
		err := g.txn(rq, func(ctx context.Context, tx *client.Txn) error {
			f, err := openAppend(ctx, tx)
			if err == nil {
				f.Close()
			}
			return err
		})
		if err != nil {
			return err
		}
		return g.redirect(rq)
	}
	return g.upload(rq, http.StatusOK, openAppend)
}

// uploadFlushBlocks bounds the blocks an upload buffers before they are
// written out (in the background, while more arrive): the memory of many
// concurrent uploads, not their speed.
const uploadFlushBlocks = 16

// upload streams the request body into the file open returns, in one
// transaction committed once the whole body has arrived. Anything else (a
// refusal, a client that disconnects or stalls, a body over the limit, a
// datanode failure) aborts it: nothing of the upload remains.
func (g *Gateway) upload(rq *request, status int, open func(ctx context.Context, tx *client.Txn) (*client.File, error)) error {
	tx := g.c.Begin()
	committed := false
	defer func() {
		if !committed {
			tx.Abort(context.Background())
		}
	}()
	clientx.CreateAs(tx, rq.who.user, rq.who.group())
	f, err := open(rq.ctx, tx)
	if err != nil {
		return err
	}
	clientx.SetFlushBlocks(f, uploadFlushBlocks)
	var body io.Reader = &deadlineReader{r: rq.r.Body, rc: http.NewResponseController(rq.w), idle: g.opt.IdleTimeout}
	if g.opt.MaxUpload > 0 {
		body = io.LimitReader(body, g.opt.MaxUpload+1)
	}
	bs, err := g.blocksize(rq.ctx, tx, f)
	if err != nil {
		return err
	}
	n, err := copyInBlocks(f, body, bs)
	if err != nil {
		return excIO.errorf("upload to %s failed after %d bytes, nothing of it was kept: %v", rq.path, n, err)
	}
	if g.opt.MaxUpload > 0 && n > g.opt.MaxUpload {
		return excTooLarge.errorf("upload to %s is larger than the gateway's limit of %d bytes (-max-upload); nothing of it was kept", rq.path, g.opt.MaxUpload)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("upload to %s failed, nothing of it was kept: %w", rq.path, err)
	}
	if err := tx.Commit(rq.ctx); err != nil {
		return fmt.Errorf("upload to %s failed at commit, nothing of it was kept: %w", rq.path, err)
	}
	committed = true
	if status == http.StatusCreated {
		scheme := "http"
		if rq.r.TLS != nil {
			scheme = "https"
		}
		rq.w.Header().Set("Location", scheme+"://"+rq.r.Host+(&url.URL{Path: Prefix + rq.path}).EscapedPath())
	}
	rq.w.Header().Set("Content-Length", "0")
	rq.w.WriteHeader(status)
	return nil
}

// uploadChunk is the least an upload reads before writing it to the file.
const uploadChunk = 1 << 20

// copyInBlocks copies body to the end of f (whose blocks are bs bytes)
// in pieces of whole blocks, at least uploadChunk bytes, the first one
// only up to the next block boundary (an append): each write then fills
// blocks from their start, which the client takes without clearing or
// merging them, whatever pieces the connection delivers. It returns the
// bytes copied.
func copyInBlocks(f *client.File, body io.Reader, bs int) (int64, error) {
	chunk := bs * max(1, uploadChunk/bs)
	buf := make([]byte, chunk)
	want := chunk - int(f.Size()%int64(chunk))
	var n int64
	for {
		k, end, err := fill(body, buf[:want])
		if k > 0 {
			if _, werr := f.Write(buf[:k]); werr != nil {
				return n, werr
			}
			n += int64(k)
		}
		if end || err != nil {
			return n, err
		}
		want = chunk
	}
}

// fill reads r into buf until buf is full or r ends (end). Unlike
// io.ReadFull it passes on r's own io.ErrUnexpectedEOF: the body of a
// client that disconnected early.
func fill(r io.Reader, buf []byte) (n int, end bool, err error) {
	for n < len(buf) {
		k, err := r.Read(buf[n:])
		n += k
		if err == io.EOF {
			return n, true, nil
		}
		if err != nil {
			return n, false, err
		}
	}
	return n, false, nil
}

// blocksize returns the cluster's blocksize (one for every file), asked
// of the namenode with the first upload.
func (g *Gateway) blocksize(ctx context.Context, tx *client.Txn, f *client.File) (int, error) {
	if bs := g.bs.Load(); bs > 0 {
		return int(bs), nil
	}
	fi, err := tx.StatInode(ctx, f.Ino())
	if err != nil {
		return 0, err
	}
	if fi.Blocksize <= 0 {
		return uploadChunk, nil
	}
	g.bs.Store(int64(fi.Blocksize))
	return int(fi.Blocksize), nil
}
