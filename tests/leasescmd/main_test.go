package leasescmd_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"leases/internal/roles"
	"leases/testkit/commandtest"
	"leases/testkit/testctx"
)

// The exit statuses of the command (docs/operators.md).
const (
	exitOK      = 0
	exitRefused = 1
	exitUsage   = 2
	exitLost    = 4
)

// TestMain lets this binary play an etcd member (package etcdcluster
// re-executes it) and the CMDs the command runs (commandtest.PlayCMD),
// and removes the built command after the last test.
func TestMain(m *testing.M) {
	roles.Run()
	commandtest.PlayCMD()
	code := m.Run()
	if built.dir != "" {
		if err := os.RemoveAll(built.dir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(roles.CheckUnused(code))
}

// built is the command, built once per test binary by the first test
// that runs it, into a directory of its own that TestMain removes.
var built struct {
	once      sync.Once
	dir, path string
	err       error
}

// command is the path of the leases command, built from cmd/leases with
// the go command that runs the tests (go test puts it first on PATH);
// without one, the test is skipped.
func command(t *testing.T) string {
	t.Helper()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("skipped: no go command on PATH to build cmd/leases with")
	}
	built.once.Do(func() {
		if built.dir, built.err = os.MkdirTemp("", "leasescmd-"); built.err != nil {
			return
		}
		built.path = filepath.Join(built.dir, "leases")
		if runtime.GOOS == "windows" {
			built.path += ".exe"
		}
		build := exec.CommandContext(testctx.Context(t), goCmd, "build", "-o", built.path, ".")
		if build.Dir, built.err = filepath.Abs(filepath.Join("..", "..", "cmd", "leases")); built.err != nil {
			return
		}
		if out, err := build.CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go build ./cmd/leases: %w\n%s", err, out)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.path
}

// leases runs the command with args to its end, its input closed and
// LEASES_STORE unset (the tests say where the leases are).
func leases(t *testing.T, args ...string) commandtest.Result {
	t.Helper()
	return commandtest.Run(t, leasesCommand(t, args))
}

// start starts the command with args in a process of its own; it is
// killed when the test ends, if still running.
func start(t *testing.T, args ...string) *commandtest.Process {
	t.Helper()
	return commandtest.Start(t, leasesCommand(t, args))
}

func leasesCommand(t *testing.T, args []string) *exec.Cmd {
	t.Helper()
	c := exec.Command(command(t), args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LEASES_STORE=") {
			c.Env = append(c.Env, kv)
		}
	}
	return c
}

// commandLine is a command line: the command, the store's flags, the rest.
func commandLine(store []string, command string, args ...string) []string {
	return append(append([]string{command}, store...), args...)
}

// leaseJSON and holdersJSON are what the command prints with --json, as
// far as the tests read it (docs/operators.md).
type leaseJSON struct {
	Holder      string `json:"holder"`
	ExpiresAt   string `json:"expires_at"`
	Epoch       int64  `json:"epoch"`
	ExpiresInMs *int64 `json:"expires_in_ms"`
	Clock       string `json:"clock"`
}

type holdersJSON struct {
	Store       string      `json:"store"`
	AtTheLatest bool        `json:"at_the_latest"`
	Now         string      `json:"now"`
	Leases      []leaseJSON `json:"leases"`
}
