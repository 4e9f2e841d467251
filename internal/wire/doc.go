// Package wire defines what crosses the network between Plasma processes:
// the framing of the namenode RPC (many requests in flight on one connection,
// told apart by request id), the request and response messages, and the
// frames of the datanode data-transfer protocol.
//
// Every decoder here is written for hostile input: lengths are checked
// against fixed limits before anything is allocated, and a malformed frame
// yields an error, never a panic. Callers close the connection on a decode
// error.
package wire
