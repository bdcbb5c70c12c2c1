// Package roles lets one executable play several parts. A process that
// needs a helper process (an etcd member, a worker) re-executes its own
// binary with the helper's role named in the environment; the binary's
// main, or its TestMain, calls Run first thing, and Run plays the named
// role and exits instead of returning. This is how os/exec's own tests
// run their helper commands, and it needs no second binary: a test binary
// and a command alike carry every role they register.
//
// Roles are registered by name, usually from a package-level variable of
// the package that starts the helper:
//
//	var member = roles.Register("etcd-member", runMember)
//
//	cmd, err := member.Command("m0", dir) // a child in the role "etcd-member"
//
// Mistakes fail loudly rather than quietly running the wrong thing: a
// name registered twice panics at start-up; a child whose binary never
// calls Run would run the parent's main again, so Command refuses to make
// one until Run has been called in this process; a child started in a
// role its binary does not know exits with status 2, naming it; and a
// test binary whose TestMain ends with CheckUnused fails when a role it
// registered was never started by a full run of its tests.
package roles

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"sync"
)

// Env is the environment variable that names a child's role.
const Env = "LEASES_ROLE"

// Role is a registered part that this binary can play in a child process.
type Role struct{ name string }

var (
	mu         sync.Mutex
	registered = map[string]func(args []string) int{}
	used       = map[string]bool{}
	ran        bool // Run was called in this process
)

// Register registers a role called name, played by play: Run calls it
// with the child's arguments and exits with the status it returns.
// Register panics if name is empty or taken: two parts of one binary
// must not answer to the same name.
func Register(name string, play func(args []string) int) Role {
	if name == "" || play == nil {
		panic("roles: a role needs a name and a function")
	}
	mu.Lock()
	defer mu.Unlock()
	if registered[name] != nil {
		panic(fmt.Sprintf("roles: role %q registered twice", name))
	}
	registered[name] = play
	return Role{name: name}
}

// Name is the role's name.
func (r Role) Name() string { return r.name }

// Run plays the role this process was started in, if any, and exits with
// its status; otherwise it returns at once. Call it first thing in main
// or TestMain, before flags are parsed. A role that the binary did not
// register ends the process with status 2 and one line on stderr.
func Run() {
	mu.Lock()
	ran = true
	name, inRole := os.LookupEnv(Env)
	play := registered[name]
	mu.Unlock()
	if !inRole {
		return
	}
	os.Exit(run(name, play, os.Args[1:], os.Stderr))
}

// run plays name with args, or says why it cannot. Children the role
// starts do not inherit its name: each names its own.
func run(name string, play func([]string) int, args []string, stderr io.Writer) int {
	if play == nil {
		fmt.Fprintf(stderr, "roles: this binary has no role %q\n", name)
		return 2
	}
	_ = os.Unsetenv(Env)
	return play(args)
}

// Command returns a command that runs this binary in role r with args.
// The caller sets its input, output and process attributes and starts
// it. It fails when Run has not been called in this process: the child
// could not then find its role, and would run this binary's main again.
func (r Role) Command(args ...string) (*exec.Cmd, error) {
	mu.Lock()
	ok := ran
	used[r.name] = true
	mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("roles: cannot start role %q: this binary's main or TestMain does not call roles.Run first", r.name)
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("roles: find own executable: %w", err)
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), Env+"="+r.name)
	return cmd, nil
}

// MaySkip records that a test which would start r may skip before it
// does, so that CheckUnused does not count r as forgotten.
func (r Role) MaySkip() {
	mu.Lock()
	defer mu.Unlock()
	used[r.name] = true
}

// Unused returns, sorted, the registered roles for which no Command was
// made and MaySkip was not called.
func Unused() []string {
	mu.Lock()
	defer mu.Unlock()
	var unused []string
	for name := range registered {
		if !used[name] {
			unused = append(unused, name)
		}
	}
	slices.Sort(unused)
	return unused
}

// CheckUnused is for the end of a TestMain: given m.Run's status, it
// returns 1 instead of 0 when every test ran (no -test.run, -test.skip
// or -test.list) and a registered role was never started, naming it on
// stderr; a role that no test starts is a test that was lost.
func CheckUnused(code int) int {
	if code != 0 || filtered() {
		return code
	}
	if unused := Unused(); len(unused) > 0 {
		fmt.Fprintf(os.Stderr, "roles: registered but never started: %q\n", unused)
		return 1
	}
	return code
}

// filtered reports whether the test run was narrowed by a flag of
// package testing, or is no test run at all.
func filtered() bool {
	for _, name := range []string{"test.run", "test.skip", "test.list"} {
		f := flag.Lookup(name)
		if f == nil {
			return true // not a test binary
		}
		if f.Value.String() != "" {
			return true
		}
	}
	return false
}
