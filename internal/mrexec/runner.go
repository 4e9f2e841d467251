package mrexec

import (
	"context"

	"github.com/plasmafs/plasma/client"
)

// Runner runs task attempts somewhere: in this process or on a task
// server.
type Runner interface {
	Worker() Worker
	Slots() int
	// Run runs an attempt. An error means the runner could not say how
	// the attempt went (e.g. its task server died); a failed attempt is a
	// Result with Error set.
	Run(ctx context.Context, t Task) (Result, error)
	// Alive says whether the runner can still take tasks.
	Alive(ctx context.Context) bool
}

// Local runs tasks in goroutines of this process.
type Local struct {
	C     *client.Client
	N     int
	Node  string // the local datanode's identity, if any
	Label string
}

func (l *Local) Worker() Worker {
	name := l.Label
	if name == "" {
		name = "local"
	}
	return Worker{Name: name, Node: l.Node}
}
func (l *Local) Slots() int                     { return l.N }
func (l *Local) Alive(ctx context.Context) bool { return true }
func (l *Local) Run(ctx context.Context, t Task) (Result, error) {
	return Execute(ctx, l.C, l.Worker(), t), nil
}
