package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"leases/internal/roles"
	"leases/testkit/commandtest"
)

// asCommand is the first argument by which the test binary plays the
// command itself, as cmd/leases's main runs it, so that the tests need no
// go build and no shell; then: the command's arguments. It plays the
// CMDs that run starts too (commandtest.PlayCMD), and run's watchdog
// (package roles).
const asCommand = "leases-test-as-command"

func TestMain(m *testing.M) {
	roles.Run() // run's watchdog
	if len(os.Args) > 1 && os.Args[1] == asCommand {
		os.Exit(Main(os.Args[2:], os.Stdout, os.Stderr))
	}
	commandtest.PlayCMD()
	os.Exit(m.Run())
}

// result is how a command ended.
type result = commandtest.Result

// invoke runs the command in this process, with env as its environment
// (nothing of the test's own), and returns how it ended.
func invoke(t *testing.T, env map[string]string, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	c := &cli{stdout: &stdout, stderr: &lockedWriter{w: &stderr}, getenv: func(k string) string { return env[k] }}
	code := c.main(args)
	return result{Code: code, Stdout: stdout.String(), Stderr: stderr.String()}
}

// start starts the command with args, in a process of its own (its CMD
// is this binary too); it is killed when the test ends, if still running.
func start(t *testing.T, args ...string) *commandtest.Process {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c := exec.Command(exe, append([]string{asCommand}, args...)...)
	c.Env = withoutStoreEnv(os.Environ())
	return commandtest.Start(t, c)
}

// withoutStoreEnv is env without LEASES_STORE: the tests say where the
// leases are.
func withoutStoreEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, storeEnv+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// sqliteFile is a path for a SQLite file of the test's own.
func sqliteFile(t *testing.T) string { return filepath.Join(t.TempDir(), "leases.db") }
