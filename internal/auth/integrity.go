package auth

import (
	"bufio"
	"crypto/aes"
	"crypto/cipher"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
)

// Level integrity: after the TLS 1.3 handshake the connection continues in
// plaintext, cut into records, each followed by a MAC:
//
//	length (4 bytes, big-endian, 1..maxRecord) | payload | tag (16 bytes)
//
// The tag is AES-256-GMAC (GCM with nothing to encrypt, the payload as
// additional data) under a key of this connection and direction, with the
// record's sequence number as nonce. GHASH covers the payload's length, so
// the tag authenticates the record's number, length and bytes: a changed,
// inserted, dropped, replayed or reordered record fails the check, and the
// connection fails with ErrIntegrity before any of its bytes reach the
// reader. The two keys come from the handshake (TLS exporter, RFC 5705), so
// only the two authenticated peers know them; each direction has its own
// key, so a nonce never repeats under one key.
const (
	maxRecord   = 64 << 10
	tagLen      = 16
	exportLabel = "EXPORTER-plasmafs-integrity"
)

// ErrIntegrity reports a record whose MAC does not match: the bytes were
// changed on the way (or the peer is not the one that authenticated).
var ErrIntegrity = errors.New("integrity check failed: data altered in transit")

// macConn is a net.Conn at level integrity. Read and Write may be called
// concurrently with each other (not Read with Read, nor Write with Write,
// as for any stream).
type macConn struct {
	net.Conn

	rmu    sync.Mutex
	br     *bufio.Reader
	rmac   cipher.AEAD
	rseq   uint64
	rnonce [12]byte
	rlen   int    // payload length of the record being read; 0 before its header
	rhave  int    // bytes of its payload and tag received so far (in rbuf)
	rbuf   []byte // payload and tag of a record read in pieces
	out    []byte // verified payload not yet returned
	rerr   error  // sticky: the stream cannot continue

	wmu    sync.Mutex
	wmac   cipher.AEAD
	wseq   uint64
	wnonce [12]byte
	wmeta  []byte // headers and tags of one Write
	wbufs  [][]byte
	werr   error
}

// newMACConn wraps c (the raw connection tc ran its handshake on) at level
// integrity; server tells which direction's key signs what this side writes.
func newMACConn(c net.Conn, tc *tls.Conn, server bool) (*macConn, error) {
	cs := tc.ConnectionState()
	km, err := cs.ExportKeyingMaterial(exportLabel, nil, 64)
	if err != nil {
		return nil, fmt.Errorf("%w: integrity keys: %v", ErrAuth, err)
	}
	return macWithKeys(c, km, server)
}

// macWithKeys wraps c with the 64 bytes of key material km: the first half
// keys what the client sends, the second what the server sends.
func macWithKeys(c net.Conn, km []byte, server bool) (*macConn, error) {
	c2s, err := gmac(km[:32])
	if err != nil {
		return nil, err
	}
	s2c, err := gmac(km[32:])
	if err != nil {
		return nil, err
	}
	m := &macConn{Conn: c, br: bufio.NewReaderSize(c, 16<<10)}
	if server {
		m.rmac, m.wmac = c2s, s2c
	} else {
		m.rmac, m.wmac = s2c, c2s
	}
	return m, nil
}

func gmac(key []byte) (cipher.AEAD, error) {
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(b)
}

func setNonce(n *[12]byte, seq uint64) []byte {
	binary.BigEndian.PutUint64(n[4:], seq)
	return n[:]
}

// Write sends p as records of at most maxRecord bytes, in one writev.
// After a failed write the stream is broken and every later write fails.
func (m *macConn) Write(p []byte) (int, error) {
	m.wmu.Lock()
	defer m.wmu.Unlock()
	if m.werr != nil {
		return 0, m.werr
	}
	if len(p) == 0 {
		return 0, nil
	}
	nrec := (len(p) + maxRecord - 1) / maxRecord
	if cap(m.wmeta) < nrec*(4+tagLen) {
		m.wmeta = make([]byte, 0, nrec*(4+tagLen))
	}
	meta := m.wmeta[:0]
	bufs := m.wbufs[:0]
	for off := 0; off < len(p); off += maxRecord {
		chunk := p[off:min(off+maxRecord, len(p))]
		i := len(meta)
		meta = binary.BigEndian.AppendUint32(meta, uint32(len(chunk)))
		meta = m.wmac.Seal(meta, setNonce(&m.wnonce, m.wseq), nil, chunk)
		m.wseq++
		bufs = append(bufs, meta[i:i+4], chunk, meta[i+4:i+4+tagLen])
	}
	nb := net.Buffers(bufs)
	_, err := nb.WriteTo(m.Conn)
	clear(bufs) // keep no reference to the caller's buffer
	m.wbufs = bufs[:0]
	if err != nil {
		m.werr = err
		return 0, err
	}
	return len(p), nil
}

// Read returns verified payload bytes only. A timeout leaves the record
// being read intact (the next Read continues it); any other error, and a
// failed MAC, ends the stream.
func (m *macConn) Read(p []byte) (int, error) {
	m.rmu.Lock()
	defer m.rmu.Unlock()
	if len(m.out) > 0 {
		n := copy(p, m.out)
		m.out = m.out[n:]
		return n, nil
	}
	if m.rerr != nil {
		return 0, m.rerr
	}
	if len(p) == 0 {
		return 0, nil
	}
	if m.rlen == 0 {
		h, err := m.br.Peek(4)
		if err != nil {
			return 0, m.failed(err)
		}
		n := binary.BigEndian.Uint32(h)
		if n == 0 || n > maxRecord {
			return 0, m.broken(fmt.Errorf("%w: record of %d bytes", ErrIntegrity, n))
		}
		m.br.Discard(4)
		m.rlen, m.rhave = int(n), 0
	}
	total := m.rlen + tagLen
	if m.rhave == 0 && len(p) >= total {
		// The whole record fits: read it straight into p (a reader's
		// scratch space for the call), verify, return the payload.
		k, err := io.ReadFull(m.br, p[:total])
		if err != nil {
			m.keep(p[:k])
			return 0, m.failed(err)
		}
		return m.verify(p[:m.rlen], p[m.rlen:total], false)
	}
	if cap(m.rbuf) < total {
		m.rbuf = make([]byte, maxRecord+tagLen)
	}
	buf := m.rbuf[:total]
	k, err := io.ReadFull(m.br, buf[m.rhave:])
	m.rhave += k
	if err != nil {
		return 0, m.failed(err)
	}
	if _, err := m.verify(buf[:m.rlen], buf[m.rlen:], true); err != nil {
		return 0, err
	}
	n := copy(p, m.out)
	m.out = m.out[n:]
	return n, nil
}

// keep saves the first bytes of a record read into a caller's buffer when
// the read was interrupted, so the next Read continues the record.
func (m *macConn) keep(b []byte) {
	if len(b) == 0 {
		return
	}
	if cap(m.rbuf) < maxRecord+tagLen {
		m.rbuf = make([]byte, maxRecord+tagLen)
	}
	m.rhave = copy(m.rbuf[:m.rlen+tagLen], b)
}

func (m *macConn) verify(payload, tag []byte, buffered bool) (int, error) {
	_, err := m.rmac.Open(nil, setNonce(&m.rnonce, m.rseq), tag, payload)
	m.rseq++
	m.rlen, m.rhave = 0, 0
	if err != nil {
		return 0, m.broken(ErrIntegrity)
	}
	if buffered {
		m.out = payload
		return 0, nil
	}
	return len(payload), nil
}

// failed handles an error of the underlying connection: a timeout may be
// retried; anything else ends the stream (EOF inside a record is a
// truncation: io.ErrUnexpectedEOF).
func (m *macConn) failed(err error) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return err
	}
	if err == io.EOF && (m.rlen != 0 || m.br.Buffered() > 0) {
		err = io.ErrUnexpectedEOF
	}
	m.rerr = err
	return err
}

// broken ends the stream after a MAC failure and closes the connection.
func (m *macConn) broken(err error) error {
	m.rerr = err
	m.out = nil
	m.Conn.Close()
	return err
}
