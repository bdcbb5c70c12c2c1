package command

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"leases/evidence/backend"
)

// untouchable is a backend that fails the test if the command starts it or
// opens a store on it: what the command refuses, it refuses before
// anything runs.
type untouchable struct{ t *testing.T }

func (u untouchable) Name() string { return "untouchable" }

func (u untouchable) Open(context.Context, string) (backend.Store, error) {
	u.t.Error("the command opened a store before refusing")
	return nil, errors.New("untouchable")
}

func (u untouchable) Start(context.Context, string) (backend.Deployment, error) {
	u.t.Error("the command started a backend before refusing")
	return nil, errors.New("untouchable")
}

// refused runs the command on an untouchable backend with args and fails t
// unless it exits 2 with one line on stderr that starts with want, and
// nothing on stdout; it returns that line.
func refused(t *testing.T, want string, args ...string) string {
	t.Helper()
	var stdout, stderr strings.Builder
	code := Main(t.Context(), []backend.Driver{untouchable{t}}, args, &stdout, &stderr)
	if code != ExitUsage || stdout.Len() != 0 || strings.Count(stderr.String(), "\n") != 1 ||
		!strings.HasPrefix(stderr.String(), want) {
		t.Fatalf("exit %d, stdout %q, stderr %q; want exit %d and one line starting %q",
			code, stdout.String(), stderr.String(), ExitUsage, want)
	}
	return stderr.String()
}

// committed is results.json as committed.
func committed(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("../../results.json")
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
