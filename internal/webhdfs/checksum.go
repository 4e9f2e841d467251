package webhdfs

import (
	"context"
	"crypto/md5"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"hash/crc32"
	"net/http"
)

// checksumBytesPerCRC is the chunk size of the checksum (HDFS's default
// dfs.bytes-per-checksum).
const checksumBytesPerCRC = 512

// fileChecksum answers HDFS's MD5-of-MD5-of-CRC32C checksum of the file's
// bytes: CRC32C of every 512-byte chunk, MD5 of each block's chunk CRCs,
// MD5 of those. Block boundaries are the PlasmaFS blocksize's, so it
// equals HDFS's checksum of the same bytes where HDFS's block size is the
// same (and dfs.checksum.type is CRC32C), and always compares PlasmaFS
// files with each other. The gateway reads the whole file to compute it.
func (g *Gateway) fileChecksum(rq *request) error {
	tx := g.c.Begin()
	defer tx.Abort(context.Background())
	f, err := openFile(rq.ctx, tx, rq, permRead)
	if err != nil {
		return err
	}
	var bs int
	err = func() error {
		fi, err := tx.StatInode(rq.ctx, f.Ino())
		bs = fi.Blocksize
		return err
	}()
	if err != nil {
		return wrapPath(rq.path, err)
	}
	if bs <= 0 || bs%checksumBytesPerCRC != 0 {
		return excUnsupported.errorf("%s: blocksize %d is not a multiple of %d bytes", rq.path, bs, checksumBytesPerCRC)
	}
	sum := newMD5MD5CRC(bs)
	if _, err := f.WriteTo(sum); err != nil {
		return wrapPath(rq.path, err)
	}
	crcPerBlock := int64(0)
	if f.Size() > int64(bs) {
		crcPerBlock = int64(bs / checksumBytesPerCRC)
	}
	md := sum.sum()
	b := binary.BigEndian.AppendUint32(nil, checksumBytesPerCRC)
	b = binary.BigEndian.AppendUint64(b, uint64(crcPerBlock))
	b = append(b, md...)
	writeJSON(rq.w, http.StatusOK, map[string]any{"FileChecksum": map[string]any{
		"algorithm": fmt.Sprintf("MD5-of-%dMD5-of-%dCRC32C", crcPerBlock, checksumBytesPerCRC),
		"bytes":     hex.EncodeToString(b),
		"length":    len(b),
	}})
	return nil
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// md5md5crc computes the checksum of fileChecksum over what is written
// to it.
type md5md5crc struct {
	bs        int
	chunk     uint32 // CRC32C of the current chunk so far
	inChunk   int
	inBlock   int
	blockSums hash.Hash // MD5 of the current block's chunk CRCs
	fileSum   hash.Hash // MD5 of the block MD5s
}

func newMD5MD5CRC(bs int) *md5md5crc {
	return &md5md5crc{bs: bs, blockSums: md5.New(), fileSum: md5.New()}
}

func (m *md5md5crc) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		k := min(len(p), checksumBytesPerCRC-m.inChunk)
		m.chunk = crc32.Update(m.chunk, castagnoli, p[:k])
		m.inChunk += k
		m.inBlock += k
		p = p[k:]
		if m.inChunk == checksumBytesPerCRC {
			m.endChunk()
		}
		if m.inBlock == m.bs {
			m.endBlock()
		}
	}
	return n, nil
}

func (m *md5md5crc) endChunk() {
	m.blockSums.Write(binary.BigEndian.AppendUint32(nil, m.chunk))
	m.chunk, m.inChunk = 0, 0
}

func (m *md5md5crc) endBlock() {
	m.fileSum.Write(m.blockSums.Sum(nil))
	m.blockSums.Reset()
	m.inBlock = 0
}

// sum ends a partial last chunk and block and returns the file MD5.
func (m *md5md5crc) sum() []byte {
	if m.inChunk > 0 {
		m.endChunk()
	}
	if m.inBlock > 0 {
		m.endBlock()
	}
	return m.fileSum.Sum(nil)
}
