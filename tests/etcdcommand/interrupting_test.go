package etcdcommand_test

import (
	"context"
	"os"
	"strings"
	"syscall"

	"leases/internal/experiment/backend"
)

// interruptingKind is kind, except that the failover scenario's place
// signals the command (this process) at a point of the failover: at is
// POINT:SIGNAL, POINT one of "before-kill" (as StopLeader starts),
// "after-kill" (once the others serve again) and "restart" (as the killed
// member restarts). Right before it signals, it writes a byte to fd 4, the
// test's marker pipe.
func interruptingKind(kind backend.Kind, at string) backend.Kind {
	point, name, _ := strings.Cut(at, ":")
	sig := os.Signal(os.Interrupt)
	switch name {
	case "SIGTERM":
		sig = syscall.SIGTERM
	case "SIGKILL":
		sig = syscall.SIGKILL
	}
	return interrupting{Kind: kind, point: point, sig: sig}
}

type interrupting struct {
	backend.Kind
	point string
	sig   os.Signal
}

func (k interrupting) Start(ctx context.Context, dir string) (backend.Running, error) {
	r, err := k.Kind.Start(ctx, dir)
	if err != nil {
		return nil, err
	}
	return interruptingRunning{Running: r, failing: r.(backend.Failing), k: k}, nil
}

// signal marks the moment and signals this process.
func (k interrupting) signal() {
	_, _ = os.NewFile(4, "marker").Write([]byte{1})
	self, _ := os.FindProcess(os.Getpid())
	_ = self.Signal(k.sig)
}

type interruptingRunning struct {
	backend.Running
	failing backend.Failing
	k       interrupting
}

func (r interruptingRunning) Failed() <-chan struct{} { return r.failing.Failed() }
func (r interruptingRunning) Err() error              { return r.failing.Err() }

func (r interruptingRunning) NewPlace(ctx context.Context, scenario string) (backend.Place, error) {
	p, err := r.Running.NewPlace(ctx, scenario)
	if c, ok := p.(backend.Cluster); ok && err == nil {
		return interruptingPlace{Cluster: c, k: r.k}, nil
	}
	return p, err
}

type interruptingPlace struct {
	backend.Cluster
	k interrupting
}

func (p interruptingPlace) StopLeader(ctx context.Context) error {
	if p.k.point == "before-kill" {
		p.k.signal()
	}
	err := p.Cluster.StopLeader(ctx)
	if p.k.point == "after-kill" {
		p.k.signal()
	}
	return err
}

func (p interruptingPlace) RestartStopped(ctx context.Context) error {
	if p.k.point == "restart" {
		p.k.signal()
	}
	return p.Cluster.RestartStopped(ctx)
}
