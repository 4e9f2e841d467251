package webhdfs

import (
	"io"
	"net/http"
	"strconv"

	"github.com/plasmafs/plasma/client"
)

// rangeReadAtBlocks bounds the OPEN ranges (offset and length given) read
// with one ReadAt instead of streamed with WriteTo: ranges of at most
// this many blocks, such as the footers and row groups that Parquet and
// ORC readers ask for through fsspec. WriteTo fetches client.ReadAhead
// blocks at once and one more per block sent, whatever the length, so
// that a range inside one block cost the datanodes eight (measured by
// TestWebHDFSRangeReads); one ReadAt reads the one or two blocks the
// range covers, one after the other, and nothing else.
const rangeReadAtBlocks = 2

// sendRange answers an OPEN of the n bytes at off of f (within the file)
// with one ReadAt into a buffer of n bytes. The bytes are read before the
// status is sent, so a failure is a Hadoop error rather than a short body.
func (g *Gateway) sendRange(rq *request, f *client.File, off, n int64) error {
	buf := make([]byte, n)
	k, err := f.ReadAt(buf, off)
	if err == io.EOF && int64(k) == n {
		err = nil
	}
	if err == nil && int64(k) < n {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		return wrapPath(rq.path, err)
	}
	h := rq.w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Length", strconv.FormatInt(n, 10))
	rq.w.WriteHeader(http.StatusOK)
	if _, err := g.stallGuard(rq.w).Write(buf); err != nil {
		// The status is sent: all the client can learn is a short body.
		panic(http.ErrAbortHandler)
	}
	return nil
}
