package mapred

import (
	"bytes"
	"context"
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
	Addr string
	info Info
	hc   *http.Client
}

// Dial asks the task server at addr who it is.
func Dial(ctx context.Context, addr string) (*Remote, error) {
	tr := &http.Transport{DialContext: (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 15 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 64}
	r := &Remote{Addr: addr, hc: &http.Client{Transport: tr}}
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
	resp, err := r.hc.Do(q)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %s", resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(&r.info)
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
