// Package rpc is the client side of the namenode protocol: one TCP
// connection carries any number of concurrent calls, matched to their
// responses by request id. It is used by the public client library and by
// datanodes (for registration and heartbeats).
package rpc
