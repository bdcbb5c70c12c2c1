package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"leases/testkit/testctx"

	"leases/testkit/commandtest"
)

func init() {
	// fifo-holder holds the FIFO its argument names open for writing,
	// says "started PID" on it, and holds until its input ends (the
	// test's, which ends only at cleanup).
	commandtest.RegisterCMD("fifo-holder", func(args []string) int {
		fifo, err := os.OpenFile(args[0], os.O_WRONLY, 0)
		if err != nil {
			return fatal(err)
		}
		if _, err := fmt.Fprintf(fifo, "started %d\n", os.Getpid()); err != nil {
			return fatal(err)
		}
		_, _ = io.Copy(io.Discard, os.Stdin)
		return 0
	})
}

// On Linux, CMD dies with leases: killed (SIGKILL), leases can no longer
// stop CMD when the lease ends, so the kernel's parent-death signal does.
func TestRunCMDDiesWithLeases(t *testing.T) {
	ctx := testctx.Context(t)
	dir := t.TempDir()
	db, fifo := filepath.Join(dir, "leases.db"), filepath.Join(dir, "cmd")
	var p *commandtest.Process
	held := cmdGroup(t, ctx, fifo, func() {
		p = start(t, append([]string{"run", "r", "--sqlite", db, "--"}, commandtest.CMD(t, "fifo-holder", fifo)...)...)
	})
	if err := p.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, held); err != nil {
		t.Fatalf("CMD still holds the FIFO after leases was killed: %v", err)
	}
	p.Wait()
}
