package mrexec

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/connlimit"
)

// TaskServer runs task attempts for coordinators over HTTP:
//
//	GET  /info  {"Name": ..., "Node": datanode identity, "Slots": n}
//	POST /task  a Task in JSON; answers with its Result once it ends
//
// The HTTP runs inside the cluster's connection security (auth.Server at
// TaskLevel: TLS 1.3 with certificates on both sides), so only holders of
// a cluster credential reach it and nothing travels in clear. A task runs
// with the delegated credential it carries (its submitter's, for its job;
// jobClients), its commands as the unprivileged OS account User.
//
// An attempt is stopped (its command killed, its transactions aborted)
// when the coordinator's request goes away.
type TaskServer struct {
	// C is the task server's own client: it runs tasks only at security
	// level none, where there are no identities to delegate.
	C     *client.Client
	W     Worker
	Slots int
	// Token, if set, must come with every request as "Authorization:
	// Bearer TOKEN", in addition to the connection's credential.
	Token string
	// User, if set, is the OS account task commands run as.
	User *TaskUser
	// Owner, if set, is the only PlasmaFS user whose tasks run here: a
	// server that runs task commands as its own OS user (User nil) lets
	// them read its credential and its memory (other jobs' delegated
	// keys), which only the user it works for may have.
	Owner string
	// Credential is the task server's own (role taskserver): it serves TLS
	// with it and checks delegated credentials against its CA.
	Credential *auth.Credential
	// OnRequest, if set, is told of every request by its route ("info",
	// "task" or "other"), for metrics.
	OnRequest func(route string)
	level     auth.Level
	jobs      *jobClients
	sem       chan struct{}
}

// Info is a task server's answer to GET /info.
type Info struct {
	Name  string
	Node  string
	Slots int
}

// TaskLevel is the security level of task server connections for a
// cluster whose namenode level is nn: privacy (tasks carry a private key),
// or none on a cluster that authenticates nobody.
func TaskLevel(nn string) auth.Level {
	if l, err := auth.ParseLevel(nn); err == nil && l == auth.None {
		return auth.None
	}
	return auth.Privacy
}

// NewTaskServer makes a task server running at most slots attempts at
// once with c's cluster configuration; cred is its own credential (role
// taskserver; nil only at security level none).
func NewTaskServer(c *client.Client, cred *auth.Credential, w Worker, slots int) (*TaskServer, error) {
	cfg := c.Config()
	level := TaskLevel(cfg.Security)
	if level != auth.None && (cred == nil || cred.Identity.Role != auth.RoleTaskServer) {
		return nil, errors.New("a task server needs a credential of role taskserver (issue one with 'plasma admin user add NAME -taskserver')")
	}
	return &TaskServer{C: c, W: w, Slots: slots, Credential: cred, level: level, jobs: newJobClients(cfg, cred),
		sem: make(chan struct{}, slots)}, nil
}

// Serve serves coordinators on ln until it is closed or ctx ends.
func (s *TaskServer) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{Handler: s, ReadHeaderTimeout: time.Minute,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, peerKey{}, c)
		},
		// A connection is admitted once a request arrives, that is after
		// its handshake (secureConn.NetConn leads to the accepted one).
		ConnState: connlimit.ConnState}
	stop := context.AfterFunc(ctx, func() { srv.Close() })
	defer stop()
	// The shared accept path (descriptor exhaustion, idle floods) under
	// the handshake.
	limited := connlimit.Listen(ln, connlimit.Options{Name: "task server"})
	err := srv.Serve(&secureListener{Listener: limited, level: s.level, cred: s.Credential})
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

func (s *TaskServer) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	if s.OnRequest != nil {
		s.OnRequest(taskRoute(r.URL.Path))
	}
	if s.Token != "" && subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), []byte("Bearer "+s.Token)) != 1 {
		http.Error(rw, "missing or wrong task server token", http.StatusUnauthorized)
		return
	}
	switch {
	case r.URL.Path == "/info" && r.Method == http.MethodGet:
		json.NewEncoder(rw).Encode(Info{Name: s.W.Name, Node: s.W.Node, Slots: s.Slots})
	case r.URL.Path == "/task" && r.Method == http.MethodPost:
		var t Task
		if err := json.NewDecoder(io.LimitReader(r.Body, 64<<20)).Decode(&t); err != nil {
			http.Error(rw, "bad task: "+err.Error(), http.StatusBadRequest)
			return
		}
		c, release, err := s.clientFor(r.Context(), t, peerOf(r.Context()))
		if err != nil {
			// A failed attempt, not a failed runner: the job reports why.
			json.NewEncoder(rw).Encode(Result{Error: err.Error(), Worker: s.W.Name})
			return
		}
		defer release()
		select {
		case s.sem <- struct{}{}:
		case <-r.Context().Done():
			return
		}
		res := executeAs(r.Context(), c, s.W, t, s.User)
		<-s.sem
		json.NewEncoder(rw).Encode(res)
	default:
		http.NotFound(rw, r)
	}
}

// clientFor is the client task t runs with: its job's delegated
// credential's, or at level none the task server's own.
func (s *TaskServer) clientFor(ctx context.Context, t Task, peer *auth.Identity) (*client.Client, func(), error) {
	if s.level == auth.None {
		return s.C, func() {}, nil
	}
	if s.Owner != "" && (peer == nil || peer.User != s.Owner) {
		who := "an unauthenticated peer"
		if peer != nil {
			who = peer.User
		}
		return nil, nil, fmt.Errorf("this task server runs tasks only of %s, not of %s: it is not run as root, so task commands would run as its own OS user and could read its credential and other jobs' keys (run it as root, or one task server per user)", s.Owner, who)
	}
	return s.jobs.acquire(ctx, t, peer)
}

// Remote is a Runner for a task server.
type Remote struct {
	Addr  string
	token string
	level auth.Level
	info  Info
	hc    *http.Client
}

// Dial asks the task server at addr who it is, connecting with the
// security and credential of client c; token is its token ("" if it has
// none).
func Dial(ctx context.Context, addr string, c *client.Client, token string) (*Remote, error) {
	level, cred := TaskLevel(c.Config().Security), c.Credential()
	if level != auth.None && cred == nil {
		return nil, fmt.Errorf("task server %s: a credential is needed", addr)
	}
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 15 * time.Second}
	tr := &http.Transport{MaxIdleConnsPerHost: 64,
		DialContext: func(ctx context.Context, network, a string) (net.Conn, error) {
			raw, err := dialer.DialContext(ctx, network, a)
			if err != nil {
				return nil, err
			}
			sc, err := auth.Client(raw, level, cred, auth.RoleTaskServer)
			if err != nil {
				raw.Close()
				return nil, err
			}
			return sc, nil
		}}
	r := &Remote{Addr: addr, token: token, level: level, hc: &http.Client{Transport: tr}}
	if err := r.getInfo(ctx); err != nil {
		return nil, fmt.Errorf("task server %s: %w", addr, err)
	}
	if r.info.Slots < 1 {
		return nil, fmt.Errorf("task server %s offers no slots", addr)
	}
	return r, nil
}

func (r *Remote) getInfo(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	q, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.Addr+"/info", nil)
	r.auth(q)
	resp, err := r.hc.Do(q)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("status %s: %s", resp.Status, bytes.TrimSpace(msg))
	}
	return json.NewDecoder(resp.Body).Decode(&r.info)
}

func (r *Remote) auth(q *http.Request) {
	if r.token != "" {
		q.Header.Set("Authorization", "Bearer "+r.token)
	}
}

func (r *Remote) Worker() Worker { return Worker{Name: r.Addr, Node: r.info.Node} }
func (r *Remote) Slots() int     { return r.info.Slots }
func (r *Remote) Alive(ctx context.Context) bool {
	return r.getInfo(ctx) == nil
}

// NeedsDelegation says whether the tasks this runner runs carry the
// job's delegated credential (a task server at a security level).
func (r *Remote) NeedsDelegation() bool { return r.level != auth.None }

func (r *Remote) Run(ctx context.Context, t Task) (Result, error) {
	b, err := json.Marshal(t)
	if err != nil {
		return Result{}, err
	}
	q, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+r.Addr+"/task", bytes.NewReader(b))
	r.auth(q)
	resp, err := r.hc.Do(q)
	if err != nil {
		return Result{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return Result{}, fmt.Errorf("status %s: %s", resp.Status, bytes.TrimSpace(msg))
	}
	var res Result
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		return Result{}, err
	}
	return res, nil
}

// taskRoute names a request's route for metrics (a fixed set: never a
// client's path).
func taskRoute(path string) string {
	switch path {
	case "/info":
		return "info"
	case "/task":
		return "task"
	}
	return "other"
}
