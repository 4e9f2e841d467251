package extend

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/tests/testkit"
)

// Hostile tests of extension in place (docs/design.md "Extension in
// place"): many appenders and readers of old versions at once, appends
// racing with truncates and sparse writes, writers that vanish between
// their extension and its commit, datanodes killed during appends,
// namenode restarts and power cuts between an extension and its commit,
// the block-boundary cases, and appends through the FUSE mount.

// --- records: self-checking appends -----------------------------------

// An append record is a 12-byte header (magic, writer, sequence number,
// payload length, CRC32 of header and payload) and its payload. Payloads are
// random, all zeros, or random then zeros, so some appends end in zeros
// (which the extension does not send).
const appMagic = 0xC3

type appID struct{ w, seq int }

func appRecord(w, seq int, r *rand.Rand, maxLen int) []byte {
	return appRecordEnd(w, seq, r, maxLen, true)
}

// appRecordEnd is appRecord; without zerosAtEnd the payload's last byte is
// not zero.
func appRecordEnd(w, seq int, r *rand.Rand, maxLen int, zerosAtEnd bool) []byte {
	n := 1 + r.IntN(maxLen)
	rec := make([]byte, 12+n)
	payload := rec[12:]
	switch r.IntN(4) {
	case 0: // all zeros
	case 1:
		for i := 0; i < n/2; i++ {
			payload[i] = byte(r.Uint32())
		}
	default:
		for i := range payload {
			payload[i] = byte(r.Uint32())
		}
	}
	if !zerosAtEnd {
		payload[n-1] = 0x5A
	}
	rec[0] = appMagic
	rec[1] = byte(w)
	binary.LittleEndian.PutUint16(rec[2:], uint16(seq))
	binary.LittleEndian.PutUint32(rec[4:], uint32(n))
	binary.LittleEndian.PutUint32(rec[8:], crc32.Update(crc32.ChecksumIEEE(rec[:8]), crc32.IEEETable, payload))
	return rec
}

// appParse splits data into records; it fails at the first byte that does
// not begin a whole, intact record.
func appParse(data []byte) ([]appID, error) {
	var out []appID
	off := 0
	for off < len(data) {
		if len(data)-off < 12 || data[off] != appMagic {
			return out, fmt.Errorf("offset %d of %d: no record header (bytes %x)", off, len(data), data[off:min(off+16, len(data))])
		}
		n := int(binary.LittleEndian.Uint32(data[off+4:]))
		if n > len(data) || off+12+n > len(data) {
			return out, fmt.Errorf("offset %d of %d: record of %d bytes cut off", off, len(data), n)
		}
		h := data[off : off+8]
		if crc32.Update(crc32.ChecksumIEEE(h), crc32.IEEETable, data[off+12:off+12+n]) != binary.LittleEndian.Uint32(data[off+8:]) {
			return out, fmt.Errorf("offset %d of %d: record (writer %d, seq %d) fails its checksum", off, len(data), data[off+1], binary.LittleEndian.Uint16(data[off+2:]))
		}
		out = append(out, appID{int(data[off+1]), int(binary.LittleEndian.Uint16(data[off+2:]))})
		off += 12 + n
	}
	return out, nil
}

// appAppend appends rec at the end of path in a transaction of its own
// (retried on conflicts, also past client.TxnAttempts: contention is not
// what these tests are about).
func appAppend(ctx context.Context, cl *client.Client, path string, rec []byte) error {
	for {
		err := cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
			f, err := tx.Open(ctx, path)
			if err != nil {
				return err
			}
			_, err = f.WriteAt(rec, f.Size())
			return err
		})
		if !errors.Is(err, client.ErrConflict) {
			return err
		}
	}
}

// appRead reads path whole in a transaction of its own.
func appRead(ctx context.Context, cl *client.Client, path string) ([]byte, error) {
	tx := cl.Begin()
	defer tx.Abort(ctx)
	f, err := tx.Open(ctx, path)
	if err != nil {
		return nil, err
	}
	return io.ReadAll(f)
}

func appHash(b []byte) string {
	h := sha256.Sum256(b)
	return fmt.Sprintf("%x", h[:8])
}

// appDiff describes where got and want first differ.
func appDiff(got, want []byte) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	if i == len(got) && i == len(want) {
		return "equal"
	}
	show := func(b []byte) string {
		if i >= len(b) {
			return "EOF"
		}
		return fmt.Sprintf("%x", b[i:min(i+12, len(b))])
	}
	return fmt.Sprintf("%d bytes read, %d expected; first difference at offset %d (block %d + %d): read %s, want %s",
		len(got), len(want), i, i/(64<<10), i%(64<<10), show(got), show(want))
}

// fsckOnly returns fsck's problems, except those matching one of allowed.
func fsckProblems(t *testing.T, cl *client.Client, allowed ...string) []string {
	t.Helper()
	rep, err := cl.Fsck(context.Background())
	testkit.MustOK(t, "fsck", err)
	var out []string
	for _, p := range rep.Problems {
		ok := false
		for _, a := range allowed {
			if strings.Contains(p, a) {
				ok = true
			}
		}
		if !ok {
			out = append(out, p)
		}
	}
	return out
}

// oldReader holds one committed version open and reads it again and again.
type oldReader struct {
	tx   *client.Txn
	f    *client.File
	data []byte
}

// reread reads the version again (alternately with ReadAt and through
// WriteTo) and reports whether it still reads the same.
func (o *oldReader) reread(k int) error {
	var got []byte
	if k%2 == 0 {
		got = make([]byte, len(o.data))
		n, err := o.f.ReadAt(got, 0)
		if err != nil && !(err == io.EOF && n == len(o.data)) {
			return fmt.Errorf("re-read of a version of %d bytes: %v", len(o.data), err)
		}
		got = got[:n]
	} else {
		if _, err := o.f.Seek(0, io.SeekStart); err != nil {
			return err
		}
		var buf bytes.Buffer
		if _, err := io.Copy(&buf, o.f); err != nil {
			return fmt.Errorf("re-read (WriteTo) of a version of %d bytes: %v", len(o.data), err)
		}
		got = buf.Bytes()
	}
	if !bytes.Equal(got, o.data) {
		return fmt.Errorf("a version read again reads differently: %s", appDiff(got, o.data))
	}
	return nil
}
