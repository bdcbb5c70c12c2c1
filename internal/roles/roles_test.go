package roles

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// echo is a role of this test binary: it prints its arguments and the
// role variable it sees, and exits with status 7.
var echo = Register("roles-test-echo", func(args []string) int {
	_, inRole := os.LookupEnv(Env)
	os.Stdout.WriteString(strings.Join(args, ",") + " " + map[bool]string{true: "in role", false: "no role"}[inRole])
	return 7
})

func TestMain(m *testing.M) {
	Run()
	os.Exit(CheckUnused(m.Run()))
}

// A child plays its role with its arguments and exits with its status;
// the role's name is not passed on to its own children.
func TestChildPlaysItsRole(t *testing.T) {
	cmd, err := echo.Command("a", "b")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd.Stdout = &out
	err = cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 7 || out.String() != "a,b no role" {
		t.Fatalf("child: %v, output %q; want exit status 7 and %q", err, out.String(), "a,b no role")
	}
}

// A child started in a role its binary does not know says so and exits
// with status 2, rather than running the tests again.
func TestUnknownRoleExitsTwo(t *testing.T) {
	cmd, err := echo.Command()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Env = append(cmd.Env, Env+"=no-such-role") // the last entry wins
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(stderr.String(), `no role "no-such-role"`) {
		t.Fatalf("child: %v, stderr %q; want exit status 2 naming the role", err, stderr.String())
	}
}

// A name registered twice panics.
func TestDuplicateNamePanics(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "registered twice") {
			t.Fatalf("second Register of a name: recovered %v; want a panic saying so", r)
		}
	}()
	Register("roles-test-echo", func([]string) int { return 0 })
}

// Without Run in this process, Command refuses: the child would run the
// binary's main again instead of its role.
func TestCommandNeedsRun(t *testing.T) {
	mu.Lock()
	saved := ran
	ran = false
	mu.Unlock()
	t.Cleanup(func() { mu.Lock(); ran = saved; mu.Unlock() })
	if _, err := echo.Command(); err == nil || !strings.Contains(err.Error(), "roles.Run") {
		t.Fatalf("Command before Run: %v; want an error naming roles.Run", err)
	}
}

// A registered role never started is named; one started is not.
func TestUnusedRolesAreNamed(t *testing.T) {
	fresh := Register("roles-test-fresh", func([]string) int { return 0 })
	if got := Unused(); !slices.Contains(got, "roles-test-fresh") {
		t.Fatalf("Unused() = %q; want it to name roles-test-fresh", got)
	}
	if _, err := fresh.Command(); err != nil {
		t.Fatal(err)
	}
	if got := Unused(); slices.Contains(got, "roles-test-fresh") {
		t.Fatalf("Unused() = %q after Command; want roles-test-fresh gone", got)
	}
}
