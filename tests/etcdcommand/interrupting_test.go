package etcdcommand_test

import (
	"context"
	"os"
	"strings"
	"syscall"

	"leases/evidence/backend"
)

// interruptingKind is driver, except that the failover scenario's sandbox
// signals the command (this process) at a point of the failover: at is
// POINT:SIGNAL, POINT one of "before-kill" (as StopLeader starts),
// "after-kill" (once the others serve again) and "restart" (as the killed
// member restarts). Right before it signals, it writes a byte to fd 4, the
// test's marker pipe.
func interruptingKind(driver backend.Driver, at string) backend.Driver {
	point, name, _ := strings.Cut(at, ":")
	sig := os.Signal(os.Interrupt)
	switch name {
	case "SIGTERM":
		sig = syscall.SIGTERM
	case "SIGKILL":
		sig = syscall.SIGKILL
	}
	return interrupting{Driver: driver, point: point, sig: sig}
}

type interrupting struct {
	backend.Driver
	point string
	sig   os.Signal
}

func (k interrupting) Start(ctx context.Context, dir string) (backend.Deployment, error) {
	r, err := k.Driver.Start(ctx, dir)
	if err != nil {
		return nil, err
	}
	return interruptingDeployment{Deployment: r, failing: r.(backend.Failing), k: k}, nil
}

// signal marks the moment and signals this process.
func (k interrupting) signal() {
	_, _ = os.NewFile(4, "marker").Write([]byte{1})
	self, _ := os.FindProcess(os.Getpid())
	_ = self.Signal(k.sig)
}

type interruptingDeployment struct {
	backend.Deployment
	failing backend.Failing
	k       interrupting
}

func (r interruptingDeployment) Failed() <-chan struct{} { return r.failing.Failed() }
func (r interruptingDeployment) Err() error              { return r.failing.Err() }

func (r interruptingDeployment) NewSandbox(ctx context.Context, scenario string) (backend.Sandbox, error) {
	p, err := r.Deployment.NewSandbox(ctx, scenario)
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
