package cli

import (
	"context"
	"fmt"
	"net"

	"github.com/plasmafs/plasma/internal/metrics"
	"github.com/plasmafs/plasma/internal/nfsbridge"
	"github.com/plasmafs/plasma/internal/vfs"
)

const nfsArgs = "-listen HOST:PORT [-export /path] [-async] [-ro] [-clients ADDR,NET/BITS,...] [-secure] [-no-root-squash | -all-squash] [-anonuid N] [-anongid N]"

func init() {
	register("nfs", nfsArgs, "serve PlasmaFS over NFSv3 (NFS and MOUNT on one port, no portmapper)", cmdNFS)
}

func cmdNFS(ctx context.Context, args []string) error {
	f := newFlags("nfs", nfsArgs,
		"Serve a PlasmaFS directory over NFSv3, NFS and MOUNT on one TCP port (no portmapper). File handles\n"+
			"are inode numbers: they survive a restart of the bridge and renames. Writes and metadata operations\n"+
			"are durable before the reply (RFC 1813) unless -async; UNSTABLE writes are made durable by COMMIT,\n"+
			"FILE_SYNC writes before the reply. With libnfs, use nfs://HOST/?nfsport=PORT&mountport=PORT\n"+
			"(root-level files: nfs://HOST//file?...).\n\n"+
			"AUTH_UNIX authenticates nobody: every client that may connect can claim any uid. Only the\n"+
			"addresses in -clients may connect (default: this machine); uid 0 is served as the anonymous\n"+
			"identity (-anonuid/-anongid) unless -no-root-squash, every caller with -all-squash, and calls\n"+
			"without a credential always. A -listen address other machines can reach needs -clients.", true)
	listen := f.String("listen", "127.0.0.1:2049", "address to listen on")
	export := f.String("export", "/", "PlasmaFS directory to export")
	async := f.Bool("async", false, "acknowledge writes and metadata operations once applied, durable within the namenode's window")
	ro := f.Bool("ro", false, "export read-only")
	clients := f.String("clients", "", "comma-separated addresses and networks (CIDR) that may connect (default: loopback only; required with a -listen address other machines can reach)")
	secure := f.Bool("secure", false, "accept only connections from privileged source ports (below 1024)")
	noRootSquash := f.Bool("no-root-squash", false, "serve AUTH_UNIX uid 0 as root (by default it is the anonymous identity)")
	allSquash := f.Bool("all-squash", false, "serve every caller as the anonymous identity")
	anonUID := f.intRange("anonuid", vfs.Nobody, 1, 1<<32-2, "uid of the anonymous identity")
	anonGID := f.intRange("anongid", vfs.Nobody, 1, 1<<32-2, "gid of the anonymous identity")
	adminAddr := adminFlag(f)
	if err := f.parse(args); err != nil {
		return err
	}
	if err := needArgs(f, 0, 0); err != nil {
		return err
	}
	if *noRootSquash && *allSquash {
		return usagef("-no-root-squash and -all-squash contradict each other: -all-squash serves root as the anonymous identity too")
	}
	allowed, err := nfsClients(*listen, *clients)
	if err != nil {
		return err
	}
	self := selfOwner(f)
	if self != nil && (uint32(*anonUID) == self.UID || uint32(*anonGID) == self.GID) {
		return usagef("-anonuid %d / -anongid %d: this bridge runs as uid %d gid %d, which stand for its own PlasmaFS user %s and group %s; choose other anonymous ids",
			*anonUID, *anonGID, self.UID, self.GID, self.User, self.Group)
	}
	c, err := f.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	v := vfs.New(c, vfs.Options{Sync: !*async, WriteBack: true, ReadOnly: *ro, Owner: self})
	defer v.Close()
	calls := metrics.NewRequests("nfs", "NFSv3 and MOUNT calls received, by procedure.")
	dm, err := startAdmin(adminAddr, "nfs", nil, logger("warn"), calls)
	if err != nil {
		return err
	}
	defer dm.Close()
	b, err := nfsbridge.New(ctx, v, *export, nfsbridge.Options{
		NoRootSquash: *noRootSquash, AllSquash: *allSquash, AnonUID: uint32(*anonUID), AnonGID: uint32(*anonGID), OnCall: calls.Inc})
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	l = nfsbridge.Gate(l, allowed, *secure)
	ports := ""
	if *secure {
		ports = " (privileged source ports only)"
	}
	fmt.Fprintf(stdout, "plasma: NFS clients allowed: %s%s; %s\n", allowed, ports, squashSummary(*noRootSquash, *allSquash, *anonUID, *anonGID))
	fmt.Fprintf(stdout, "plasma: serving NFSv3 of %s on %s\n", *export, l.Addr())
	done := make(chan error, 1)
	go func() { done <- b.Serve(l) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		l.Close()
		<-done
		return nil
	}
}

// nfsClients returns the client list of -clients, or loopback only when it
// is not given, which a -listen address other machines can reach does not
// allow: AUTH_UNIX would let all of them claim any uid.
func nfsClients(listen, clients string) (nfsbridge.ClientList, error) {
	if clients != "" {
		l, err := nfsbridge.ParseClients(clients)
		if err != nil {
			return l, usagef("-clients: %v", err)
		}
		return l, nil
	}
	a, err := net.ResolveTCPAddr("tcp", listen)
	if err != nil {
		return nfsbridge.ClientList{}, usagef("-listen %s: %v", listen, err)
	}
	if a.IP == nil || !a.IP.IsLoopback() {
		return nfsbridge.ClientList{}, usagef("-listen %s is reachable from other machines, and AUTH_UNIX lets any of them claim any uid: "+
			"give -clients with the addresses or networks that may connect (e.g. -clients 192.168.1.0/24), or listen on 127.0.0.1", listen)
	}
	return nfsbridge.LoopbackClients(), nil
}

func squashSummary(noRootSquash, allSquash bool, uid, gid int) string {
	switch {
	case allSquash:
		return fmt.Sprintf("every caller served as uid %d gid %d (-all-squash)", uid, gid)
	case noRootSquash:
		return "uid 0 served as root (-no-root-squash)"
	}
	return fmt.Sprintf("uid 0 served as uid %d gid %d (root squash)", uid, gid)
}
