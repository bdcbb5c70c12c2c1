package worker

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"

	"leases/evidence/backend"
	"leases/internal/roles"
)

// roleName is the name of the worker's role (package roles): a worker is
// this binary, re-executed in that role.
const roleName = "experiment-worker"

// role is the worker role, once Register has registered it.
var role struct {
	mu         sync.Mutex
	r          roles.Role
	registered bool
}

// Register lets this binary play a worker that opens its store with one
// of drivers: call it once, before roles.Run, in main or TestMain (a
// second call panics, as any role registered twice does). A worker is
// started with two arguments, the backend's name and the sandbox's
// address; with the one argument "standby", a worker in standby that reads
// them from its first input line (see Pool); with none it is a bare worker,
// which announces itself and exits when its input ends (see Bare).
//
// It returns the role, for a test binary whose workers are started by a
// child of its own (the command it plays), which calls MaySkip on it so
// that roles.CheckUnused does not count it as forgotten.
func Register(drivers ...backend.Driver) roles.Role {
	r := roles.Register(roleName, func(args []string) int {
		return play(drivers, args, os.Stdin, os.Stdout, os.Stderr)
	})
	role.mu.Lock()
	defer role.mu.Unlock()
	role.r, role.registered = r, true
	return r
}

// registered returns the worker role, or says why there is none.
func registered() (roles.Role, error) {
	role.mu.Lock()
	defer role.mu.Unlock()
	if !role.registered {
		return roles.Role{}, errors.New("this binary has no worker role: its main or TestMain must call worker.Register before roles.Run")
	}
	return role.r, nil
}

// command is a command that runs this binary in the worker role with
// args. With one P (GOMAXPROCS=1, from the start): a worker serves one
// request at a time, a run starts dozens beside each other and beside
// etcd's members on a few cores, and more Ps only spin, looking for work,
// at every wake-up, the packages' init included (etcd's registers
// hundreds of metrics, each with a goroutine of its own). Measured, a bare
// worker's start took 45 ms of CPU with two Ps and 42 ms with one, and the
// command, with its members set alike, 5% less CPU.
func command(args ...string) (*exec.Cmd, error) {
	r, err := registered()
	if err != nil {
		return nil, err
	}
	cmd, err := r.Command(args...)
	if err != nil {
		return nil, err
	}
	cmd.Env = append(cmd.Env, "GOMAXPROCS=1")
	return cmd, nil
}

// play is the worker role: a worker on one of drivers (arguments: the
// backend's name and the sandbox's address), a worker in standby (one:
// standbyArg), or a bare worker (none).
func play(drivers []backend.Driver, args []string, in io.Reader, out, stderr io.Writer) int {
	switch len(args) {
	case 0:
		fmt.Fprintf(out, "{\"pid\":%d}\n", os.Getpid())
		_, _ = io.Copy(io.Discard, in)
		return 0
	case 1:
		if args[0] == standbyArg {
			return playStandby(drivers, in, out, stderr)
		}
	case 2:
		status, _ := playAs(drivers, args[0], args[1], bufio.NewReader(in), out, stderr)
		return status
	}
	fmt.Fprintf(stderr, "worker: want a backend and an address, or nothing; got %q\n", args)
	return 2
}

// standbyArg is the one argument of a worker in standby (Pool).
const standbyArg = "standby"

// assignment is the line a worker in standby reads: where it works next.
type assignment struct {
	Backend string `json:"backend"`
	Address string `json:"address"`
}

// playStandby announces the worker and waits for an assignment, then is
// the worker it names; once that worker has left its assignment (opLeave:
// its store closed, nothing of it kept), it waits for the next. An input
// that ends while it waits is the order to exit.
func playStandby(drivers []backend.Driver, in io.Reader, out, stderr io.Writer) int {
	fmt.Fprintf(out, "{\"pid\":%d}\n", os.Getpid())
	lines := bufio.NewReader(in)
	for {
		line, err := readLine(lines)
		if err == io.EOF {
			return 0
		}
		var a assignment
		if err == nil {
			err = json.Unmarshal(line, &a)
		}
		if err != nil {
			fmt.Fprintf(stderr, "worker in standby: reading its assignment: %v\n", err)
			return 2
		}
		if status, left := playAs(drivers, a.Backend, a.Address, lines, out, stderr); !left {
			return status
		}
	}
}

// playAs is a worker on the backend called backendName and the sandbox at
// address, or, for the backend toolArg, the tool server of the file at
// address. left: it left the assignment and may take another.
func playAs(drivers []backend.Driver, backendName, address string, in *bufio.Reader, out, stderr io.Writer) (status int, left bool) {
	if backendName == toolArg {
		left, err := serveTool(address, in, out)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1, false
		}
		return 0, left
	}
	return run(context.Background(), drivers, backendName, address, in, out, stderr)
}

// Bare starts a bare worker, waits, bounded by ctx, for it to announce
// itself, ends its input and waits for it to exit: what starting a worker
// costs at the least, which the command's timings measure.
func Bare(ctx context.Context) error {
	cmd, err := command()
	if err != nil {
		return err
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() { _ = cmd.Process.Kill() })
	defer stop()
	_, readErr := bufio.NewReader(stdout).ReadString('\n')
	return errors.Join(readErr, stdin.Close(), cmd.Wait())
}
