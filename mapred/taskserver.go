package mapred

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/plasmafs/plasma/client"
)

// TaskServer runs task attempts for coordinators over HTTP:
//
//	GET  /info  {"Name": ..., "Node": datanode identity, "Slots": n}
//	POST /task  a Task in JSON; answers with its Result once it ends
//
// An attempt is stopped (its command killed, its transactions aborted)
// when the coordinator's request goes away.
type TaskServer struct {
	C     *client.Client
	W     Worker
	Slots int
	// Token, if set, must come with every request as "Authorization:
	// Bearer TOKEN": whoever may submit tasks runs commands as this
	// process's user with its PlasmaFS credential.
	Token string
	sem   chan struct{}
}

// Info is a task server's answer to GET /info.
type Info struct {
	Name  string
	Node  string
	Slots int
}

// NewTaskServer makes a task server running at most slots attempts at once.
func NewTaskServer(c *client.Client, w Worker, slots int) *TaskServer {
	return &TaskServer{C: c, W: w, Slots: slots, sem: make(chan struct{}, slots)}
}

func (s *TaskServer) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
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
		select {
		case s.sem <- struct{}{}:
		case <-r.Context().Done():
			return
		}
		res := Execute(r.Context(), s.C, s.W, t)
		<-s.sem
		json.NewEncoder(rw).Encode(res)
	default:
		http.NotFound(rw, r)
	}
}

// Remote is a Runner for a task server.
type Remote struct {
	Addr  string
	token string
	info  Info
	hc    *http.Client
}

// Dial asks the task server at addr who it is; token is its token ("" if
// it has none).
func Dial(ctx context.Context, addr, token string) (*Remote, error) {
	tr := &http.Transport{DialContext: (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 15 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 64}
	r := &Remote{Addr: addr, token: token, hc: &http.Client{Transport: tr}}
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
