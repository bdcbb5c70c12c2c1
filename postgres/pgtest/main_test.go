package pgtest_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"testing"

	"leases/postgres/pgtest"
)

// parentRole makes the test binary play the process that starts a server
// and is killed: it prints the server's pid and directory, then waits on
// its standard input.
const parentRole = "PGTEST_PLAY_PARENT"

func TestMain(m *testing.M) {
	if os.Getenv(parentRole) != "" {
		os.Exit(playParent())
	}
	os.Exit(m.Run())
}

func playParent() int {
	s, err := pgtest.Start(context.Background())
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	fmt.Println(s.Pid(), s.Dir())
	_, _ = io.Copy(io.Discard, os.Stdin) // until killed, or the test lets go
	if err := s.Close(); err != nil {
		fmt.Println("error:", err)
		return 1
	}
	return 0
}
