package commandtest

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"testing"
)

// asCMD is the first argument by which a test binary plays a CMD; then
// the CMD's name and its arguments.
const asCMD = "commandtest-as-cmd"

// cmds are the CMDs a test binary plays, by name. Each says what it does
// on its standard output, one line at a time, for the test to read.
var cmds = map[string]func(args []string) int{
	// env prints the lease it was given (leases run's environment) and
	// exits with its argument's status (0 when none).
	"env": func(args []string) int {
		fmt.Printf("LEASES_RESOURCE=%s LEASES_HOLDER=%s LEASES_EPOCH=%s\n",
			os.Getenv("LEASES_RESOURCE"), os.Getenv("LEASES_HOLDER"), os.Getenv("LEASES_EPOCH"))
		var status int
		if len(args) > 0 {
			_, _ = fmt.Sscan(args[0], &status)
		}
		return status
	},
	// fifo-holder holds the FIFO its argument names open for writing
	// (see FIFO), says "started PID" on it, and holds until its input
	// ends.
	"fifo-holder": func(args []string) int {
		fifo, err := os.OpenFile(args[0], os.O_WRONLY, 0)
		if err == nil {
			_, err = fmt.Fprintf(fifo, "started %d\n", os.Getpid())
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 125
		}
		_, _ = io.Copy(io.Discard, os.Stdin)
		// Unused after its line, the *os.File would be collectable, and
		// its cleanup would close the FIFO while CMD lives on: the test
		// would take the early end of file for CMD's end (seen once
		// under -race, the test then waiting on a CMD it thought gone).
		runtime.KeepAlive(fifo)
		return 0
	},
	// hold says "started EPOCH", appends "start EPOCH" to the file its
	// argument names (if any), holds until its input ends, appends "end
	// EPOCH", says "done EPOCH" and exits 0.
	"hold": func(args []string) int {
		epoch := os.Getenv("LEASES_EPOCH")
		appendLine(args, "start "+epoch)
		fmt.Printf("started %s\n", epoch)
		_, _ = io.Copy(io.Discard, os.Stdin)
		appendLine(args, "end "+epoch)
		fmt.Printf("done %s\n", epoch)
		return 0
	},
}

// appendLine appends line to the file args[0] names, if any.
func appendLine(args []string, line string) {
	if len(args) == 0 {
		return
	}
	f, err := os.OpenFile(args[0], os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err == nil {
		_, err = fmt.Fprintln(f, line)
		err = errors.Join(err, f.Close())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(125)
	}
}

// RegisterCMD adds a CMD of the test binary's own, beside env and hold;
// call it from an init function. A name taken already panics.
func RegisterCMD(name string, play func(args []string) int) {
	if cmds[name] != nil {
		panic(fmt.Sprintf("commandtest: CMD %q registered twice", name))
	}
	cmds[name] = play
}

// PlayCMD plays the CMD this process was started as (see CMD), if any,
// and exits with its status; otherwise it returns at once. Call it first
// thing in TestMain. A CMD the binary does not know exits 125, naming it.
func PlayCMD() {
	if len(os.Args) < 3 || os.Args[1] != asCMD {
		return
	}
	play, ok := cmds[os.Args[2]]
	if !ok {
		fmt.Fprintf(os.Stderr, "commandtest: no CMD %q\n", os.Args[2])
		os.Exit(125)
	}
	os.Exit(play(os.Args[3:]))
}

// CMD is the words that run the CMD name with args, for a command line
// of leases run: this test binary, which plays it (PlayCMD).
func CMD(t testing.TB, name string, args ...string) []string {
	t.Helper()
	cmd, err := CMDCommand(name, args...)
	if err != nil {
		t.Fatal(err)
	}
	return cmd.Args
}

// CMDCommand is a command that runs the CMD name with args: for a CMD
// that starts another.
func CMDCommand(name string, args ...string) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("commandtest: find own executable: %w", err)
	}
	return exec.Command(exe, append([]string{asCMD, name}, args...)...), nil
}
