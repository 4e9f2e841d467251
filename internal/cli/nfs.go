package cli

import (
	"context"
	"fmt"
	"net"

	"github.com/plasmafs/plasma/internal/nfsbridge"
	"github.com/plasmafs/plasma/internal/vfs"
)

func init() {
	register("nfs", "-listen HOST:PORT [-export /path] [-async] [-ro]", "serve PlasmaFS over NFSv3 (NFS and MOUNT on one port, no portmapper)", cmdNFS)
}

func cmdNFS(ctx context.Context, args []string) error {
	f := newFlags("nfs", "-listen HOST:PORT [-export /path] [-async] [-ro]",
		"Serve a PlasmaFS directory over NFSv3, NFS and MOUNT on one TCP port (no portmapper). File handles\n"+
			"are inode numbers: they survive a restart of the bridge and renames. Writes and metadata operations\n"+
			"are durable before the reply (RFC 1813) unless -async; UNSTABLE writes are made durable by COMMIT,\n"+
			"FILE_SYNC writes before the reply. With libnfs, use nfs://HOST/?nfsport=PORT&mountport=PORT\n"+
			"(root-level files: nfs://HOST//file?...).", true)
	listen := f.String("listen", "127.0.0.1:2049", "address to listen on")
	export := f.String("export", "/", "PlasmaFS directory to export")
	async := f.Bool("async", false, "acknowledge writes and metadata operations once applied, durable within the namenode's window")
	ro := f.Bool("ro", false, "export read-only")
	if err := f.parse(args); err != nil {
		return err
	}
	if err := needArgs(f, 0, 0); err != nil {
		return err
	}
	c, err := f.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	v := vfs.New(c, vfs.Options{Sync: !*async, WriteBack: true, ReadOnly: *ro, Owner: selfOwner(f)})
	defer v.Close()
	b, err := nfsbridge.New(ctx, v, *export)
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
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
