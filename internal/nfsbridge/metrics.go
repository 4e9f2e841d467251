package nfsbridge

// nfsProcNames are the NFSv3 procedures (RFC 1813), by number.
var nfsProcNames = [...]string{"null", "getattr", "setattr", "lookup", "access", "readlink", "read", "write", "create",
	"mkdir", "symlink", "mknod", "remove", "rmdir", "rename", "link", "readdir", "readdirplus", "fsstat", "fsinfo",
	"pathconf", "commit"}

// mountProcNames are the MOUNT v3 procedures, by number.
var mountProcNames = [...]string{"mnt_null", "mnt", "dump", "umnt", "umntall", "export"}

// callName names the procedure of h from a fixed set (never anything a
// client chose beyond it).
func callName(h rpcCallHeader) string {
	switch {
	case h.prog == progNFS && int(h.proc) < len(nfsProcNames):
		return nfsProcNames[h.proc]
	case h.prog == progMount && int(h.proc) < len(mountProcNames):
		return mountProcNames[h.proc]
	}
	return "other"
}

// countedRoute is route, telling Options.OnCall of each call.
func (b *Bridge) countedRoute(h rpcCallHeader) procHandler {
	if b.onCall != nil {
		b.onCall(callName(h))
	}
	return b.route(h)
}
