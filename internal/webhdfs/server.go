package webhdfs

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/nfsbridge"
)

// Prefix is where the REST API is served.
const Prefix = "/webhdfs/v1"

// Options shape a gateway.
type Options struct {
	// Trusted lists the addresses (besides loopback) whose pseudo
	// authentication (user.name=) is believed: proxies that authenticate
	// their users themselves.
	Trusted nfsbridge.ClientList
	// Cluster is the cluster name client certificates must carry.
	Cluster string
	// IdleTimeout bounds how long an upload or download may stall before
	// the gateway gives up on it (default DefaultIdleTimeout).
	IdleTimeout time.Duration
	// MaxUpload bounds the bytes of one CREATE or APPEND (0: no limit).
	MaxUpload int64
	// Log receives one line per failed request (nil: slog.Default).
	Log *slog.Logger
	// OnRequest, if set, is told of each request by its operation (for
	// metrics): see requestLabel for the names.
	OnRequest func(op string)
}

// DefaultIdleTimeout is the default Options.IdleTimeout.
const DefaultIdleTimeout = time.Minute

// Gateway serves WebHDFS requests with a PlasmaFS client.
type Gateway struct {
	c      *client.Client
	opt    Options
	groups groupCache
	bs     atomic.Int64 // the cluster's blocksize, once an upload asked
}

// New returns a gateway over c (which the caller keeps and closes).
func New(c *client.Client, opt Options) *Gateway {
	if opt.IdleTimeout <= 0 {
		opt.IdleTimeout = DefaultIdleTimeout
	}
	if opt.Log == nil {
		opt.Log = slog.Default()
	}
	return &Gateway{c: c, opt: opt}
}

// Server returns an http.Server for the gateway with timeouts that keep
// slow or stalled clients from holding it: headers must arrive within
// 30s, an idle keep-alive connection is closed after two minutes, and
// bodies are bounded per read and write by Options.IdleTimeout (not as a
// whole: uploads and downloads may take long).
func (g *Gateway) Server() *http.Server {
	return &http.Server{
		Handler:           g,
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(g.opt.Log.Handler(), slog.LevelWarn),
	}
}

// params are a request's query parameters: Hadoop's names are case
// insensitive, and so are the values of op.
type params map[string]string

func (q params) get(name string) string { return q[name] }

func parseParams(raw string) (params, error) {
	v, err := url.ParseQuery(raw)
	if err != nil {
		return nil, excArgument.errorf("malformed query string: %v", err)
	}
	q := params{}
	for k, vs := range v {
		if len(vs) > 0 {
			q[strings.ToLower(k)] = vs[0]
		}
	}
	return q, nil
}

// boolParam returns the boolean parameter name (def when absent).
func (q params) boolParam(name string, def bool) (bool, error) {
	s, ok := q[name]
	if !ok || s == "" {
		return def, nil
	}
	switch strings.ToLower(s) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, excArgument.errorf("invalid value for webhdfs parameter %q: %q is not true or false", name, s)
}

// intParam returns the integer parameter name in min..max (def when
// absent).
func (q params) intParam(name string, def, min, max int64) (int64, error) {
	s, ok := q[name]
	if !ok || s == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < min || n > max {
		return 0, excArgument.errorf("invalid value for webhdfs parameter %q: %q (want an integer from %d to %d)", name, s, min, max)
	}
	return n, nil
}

// permParam returns the octal permission parameter (def when absent).
func (q params) permParam(def uint32) (uint32, error) {
	s, ok := q["permission"]
	if !ok || s == "" {
		return def, nil
	}
	n, err := strconv.ParseUint(s, 8, 32)
	if err != nil || n > 0o1777 {
		return 0, excArgument.errorf("invalid value for webhdfs parameter \"permission\": %q (want octal 0 to 1777)", s)
	}
	return uint32(n), nil
}

// request is one WebHDFS call being served.
type request struct {
	w    http.ResponseWriter
	r    *http.Request
	ctx  context.Context
	path string // cleaned absolute PlasmaFS path
	q    params
	who  caller
}

type handler func(g *Gateway, rq *request) error

type opSpec struct {
	method string
	fn     handler
}

var ops = map[string]opSpec{
	"GETFILESTATUS":         {http.MethodGet, (*Gateway).getFileStatus},
	"LISTSTATUS":            {http.MethodGet, (*Gateway).listStatus},
	"LISTSTATUS_BATCH":      {http.MethodGet, (*Gateway).listStatusBatch},
	"OPEN":                  {http.MethodGet, (*Gateway).open},
	"GETCONTENTSUMMARY":     {http.MethodGet, (*Gateway).contentSummary},
	"GETFILECHECKSUM":       {http.MethodGet, (*Gateway).fileChecksum},
	"GETHOMEDIRECTORY":      {http.MethodGet, (*Gateway).homeDirectory},
	"GETSERVERDEFAULTS":     {http.MethodGet, (*Gateway).serverDefaults},
	"GETFILEBLOCKLOCATIONS": {http.MethodGet, (*Gateway).blockLocations},
	"CREATE":                {http.MethodPut, (*Gateway).create},
	"MKDIRS":                {http.MethodPut, (*Gateway).mkdirs},
	"RENAME":                {http.MethodPut, (*Gateway).rename},
	"SETPERMISSION":         {http.MethodPut, (*Gateway).setPermission},
	"SETOWNER":              {http.MethodPut, (*Gateway).setOwner},
	"SETREPLICATION":        {http.MethodPut, (*Gateway).setReplication},
	"SETTIMES":              {http.MethodPut, (*Gateway).setTimes},
	"APPEND":                {http.MethodPost, (*Gateway).appendFile},
	"DELETE":                {http.MethodDelete, (*Gateway).delete},
}

// unsupported are WebHDFS operations PlasmaFS has no counterpart for (or
// the gateway does not offer yet): answered UnsupportedOperationException,
// as Hadoop does for an operation a file system lacks.
var unsupported = map[string]bool{
	"GETACLSTATUS": true, "GETXATTRS": true, "LISTXATTRS": true, "CHECKACCESS": true, "GETDELEGATIONTOKEN": true,
	"GETTRASHROOT": true, "GETSNAPSHOTDIFF": true, "GETSNAPSHOTTABLEDIRECTORYLIST": true, "GETALLSTORAGEPOLICY": true,
	"GETSTORAGEPOLICY": true, "GETQUOTAUSAGE": true,
	"GET_BLOCK_LOCATIONS": true, "GETECPOLICY": true, "GETSTATUS": true, "LISTSTATUS_BATCH_RECURSIVE": true,
	"CREATESYMLINK": true, "RENEWDELEGATIONTOKEN": true, "CANCELDELEGATIONTOKEN": true, "CREATESNAPSHOT": true,
	"RENAMESNAPSHOT": true, "SETXATTR": true, "REMOVEXATTR": true, "SETSTORAGEPOLICY": true, "SATISFYSTORAGEPOLICY": true,
	"ENABLEECPOLICY": true, "DISABLEECPOLICY": true, "SETECPOLICY": true, "MODIFYACLENTRIES": true, "REMOVEACLENTRIES": true,
	"REMOVEDEFAULTACL": true, "REMOVEACL": true, "SETACL": true, "ALLOWSNAPSHOT": true, "DISALLOWSNAPSHOT": true,
	"SETQUOTA": true, "SETQUOTABYSTORAGETYPE": true, "CONCAT": true, "TRUNCATE": true, "DELETESNAPSHOT": true,
	"UNSETSTORAGEPOLICY": true, "UNSETECPOLICY": true,
}

// ServeHTTP serves one WebHDFS request. Errors are answered as Hadoop's
// RemoteException JSON; a failure of the gateway itself is one too, never
// a crash of the process.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			g.opt.Log.Error("webhdfs: internal error", "method", r.Method, "url", r.URL.String(), "error", fmt.Sprint(v))
			writeError(w, excInternal.errorf("internal error of the WebHDFS gateway serving %s (logged by the gateway)", r.URL.Path))
		}
	}()
	if strings.HasPrefix(r.UserAgent(), "Java/") {
		w = untypedJSON{w}
	}
	rq, spec, err := g.parse(w, r)
	if err == nil {
		err = spec.fn(g, rq)
	}
	if err != nil {
		// Refusals (missing files, permissions, bad parameters) are the
		// client's business; failures of the gateway or the cluster are
		// the operator's.
		if re := remoteOf(err); re.status >= 500 && r.Context().Err() == nil {
			g.opt.Log.Warn("webhdfs: request failed", "method", r.Method, "url", r.URL.String(), "error", err.Error())
		}
		writeError(w, err)
	}
}

func (g *Gateway) parse(w http.ResponseWriter, r *http.Request) (*request, opSpec, error) {
	rest, ok := strings.CutPrefix(r.URL.Path, Prefix)
	if !ok || (rest != "" && rest[0] != '/') {
		g.count(labelOther)
		return nil, opSpec{}, excNotFound.errorf("%s is not a WebHDFS URL: paths start with %s/", r.URL.Path, Prefix)
	}
	q, err := parseParams(r.URL.RawQuery)
	if err != nil {
		g.count(labelOther)
		return nil, opSpec{}, err
	}
	g.count(requestLabel(q.get("op")))
	p, err := cleanPath(rest)
	if err != nil {
		return nil, opSpec{}, err
	}
	op := strings.ToUpper(q.get("op"))
	spec, ok := ops[op]
	switch {
	case op == "":
		return nil, opSpec{}, excArgument.errorf("no operation: add op=... (GETFILESTATUS, LISTSTATUS, OPEN, CREATE, ...) to the request")
	case unsupported[op]:
		return nil, opSpec{}, excUnsupported.errorf("op=%s is not supported by the PlasmaFS WebHDFS gateway", op)
	case !ok:
		return nil, opSpec{}, excArgument.errorf("invalid value for webhdfs parameter \"op\": no operation %s", q.get("op"))
	case r.Method != spec.method:
		return nil, opSpec{}, excArgument.errorf("op=%s is a %s operation, not %s", op, spec.method, r.Method)
	}
	who, err := g.identify(r, q)
	if err != nil {
		return nil, opSpec{}, err
	}
	return &request{w: w, r: r, ctx: r.Context(), path: p, q: q, who: who}, spec, nil
}

// cleanPath returns the PlasmaFS path of the URL path after the prefix:
// absolute, without empty components; "." and ".." are refused, as HDFS
// refuses them (a path means one file, not a walk).
func cleanPath(rest string) (string, error) {
	var parts []string
	for _, c := range strings.Split(rest, "/") {
		switch {
		case c == "":
			continue
		case c == "." || c == "..":
			return "", excArgument.errorf("invalid path name %q: \".\" and \"..\" are not allowed in paths", rest)
		case strings.ContainsRune(c, 0):
			return "", excArgument.errorf("invalid path name %q: NUL in a name", rest)
		}
		parts = append(parts, c)
	}
	return "/" + strings.Join(parts, "/"), nil
}

// components splits a cleaned path into names ("/" has none).
func components(p string) []string {
	if p == "/" {
		return nil
	}
	return strings.Split(p[1:], "/")
}

// untypedJSON answers JSON without a Content-Type, for Hadoop's Java
// client: the shaded JAX-RS of hadoop-client-runtime 3.5 (which PySpark 4
// bundles) lacks the implementation its Content-Type check needs, so that
// client fails on every typed JSON answer ("Response decoding failure:
// ClassNotFoundException ... RuntimeDelegateImpl"), from any WebHDFS
// server; it skips the check when there is no Content-Type.
type untypedJSON struct{ http.ResponseWriter }

func (u untypedJSON) WriteHeader(status int) {
	h := u.Header()
	if h.Get("Content-Type") == "application/json" {
		h["Content-Type"] = nil // nil, not deleted: net/http would sniff one
	}
	u.ResponseWriter.WriteHeader(status)
}

// Unwrap lets http.ResponseController reach the connection.
func (u untypedJSON) Unwrap() http.ResponseWriter { return u.ResponseWriter }
