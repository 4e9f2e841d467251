// Package webhdfs is a gateway that serves PlasmaFS over Hadoop's WebHDFS
// REST API (under /webhdfs/v1/), so that Hadoop's webhdfs:// file system
// (Spark, hadoop fs), Python's fsspec and hdfs packages and curl reach
// PlasmaFS without a client of ours.
//
// The gateway is an adapter over the client library: every request runs
// in one PlasmaFS transaction, which commits with it (uploads commit when
// the whole body has arrived; a failed or interrupted upload is aborted and
// leaves nothing). File data streams between the HTTP body and the
// datanodes through client.File, without buffering whole files: OPEN
// with File.WriteTo (blocks read ahead, written to the connection as they
// come, with a Content-Length), except a range of at most two blocks,
// read with one ReadAt so that it costs the datanodes only the blocks it
// covers.
//
// # Identity
//
// A request is served for the user its client certificate names (TLS
// listener, certificates issued by the cluster CA), or for the user named
// by Hadoop's pseudo authentication (user.name=) when it comes from
// loopback or from an address of Options.Trusted. Pseudo authentication
// from anywhere else is refused: anyone could claim any name.
//
// The gateway acts for its users the way the NFS bridge does for its
// AUTH_UNIX callers: it runs with a superuser credential, makes what it
// creates belong to the caller (clientx.CreateAs) and checks the
// caller's permissions itself, with the rules the namenode applies to its
// own clients (search permission on every directory of a path, write and
// search permission on a directory to add or remove names in it, the
// sticky bit, owner-only chmod, superuser-only chown, owner or write
// permission for times, write permission for replication). With a
// credential that is not a superuser's, the namenode checks every request
// against that credential as well, and new files belong to it.
package webhdfs
