package main

import (
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// message is one thing the command used to say wrong (issue 23), as it
// says it now.
type message struct {
	name string
	args []string
	// run runs the command; nil: in this process (invoke).
	run  func(t *testing.T, args []string) result
	code int
	// want is a pattern the one line of stderr must match.
	want string
	// old are what the command said before, each of which must not come
	// back.
	old []string
	// atLeast is how long the command must take (it honours --timeout).
	atLeast time.Duration
}

// Every message of issue 23's list, each with its exit status, in one
// line that names the flag, the value and what is wanted, and never what
// it said before: measured on the command as it was, the old text is in
// each row. Bad input changes nothing (TestExitStatuses checks the store
// after the same kind of calls). The one message that needs an etcd
// cluster, for a TTL below etcd's minimum, is tried in tests/leasescmd.
func TestMessages(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "leases.db")
	store := "--sqlite=" + db
	if r := invoke(t, nil, "acquire", "held", store, "--holder", "worker-a", "--ttl", "1h"); r.Code != exitOK {
		t.Fatalf("setup: %v", r)
	}
	aDir := filepath.Join(dir, "a-directory")
	if err := os.Mkdir(aDir, 0o755); err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(aDir)
	if err != nil {
		t.Fatal(err)
	}
	unopenable := []string{"unable to open database file", "(14)"}
	dead := deadPort(t)
	acquire := func(args ...string) []string {
		return append([]string{"acquire", "r", store, "--holder", "h"}, args...)
	}

	cases := []message{
		{name: "a negative TTL", args: acquire("--ttl", "-5s"), code: exitUsage,
			want: `^leases: acquire: --ttl -5s is negative: want a duration of 1ms or more, such as 30s$`,
			old:  []string{"did you mean -5000000000s?"}},
		{name: "a TTL without its unit", args: acquire("--ttl", "10"), code: exitUsage,
			want: `^leases: acquire: --ttl 10 has no unit: did you mean 10s\? \(a duration such as 30s, 500ms, 1m30s\)$`,
			old:  []string{"parse error", `invalid value "10" for flag -ttl`}},
		{name: "a TTL of zero", args: acquire("--ttl", "0"), code: exitUsage,
			want: `^leases: acquire: --ttl 0 is zero: want a duration of 1ms or more, such as 30s$`,
			old:  []string{"--ttl is required"}},
		{name: "a TTL below the tick", args: acquire("--ttl", "5ns"), code: exitUsage,
			want: `--ttl 5ns is below a millisecond, the stores' tick: want 1ms or more, such as 30s$`,
			old:  []string{"did you mean 5s?"}},
		{name: "a TTL that is no duration", args: acquire("--ttl", "soon"), code: exitUsage,
			want: `--ttl "soon" is not a duration: want one such as 30s, 500ms, 1m30s$`,
			old:  []string{"parse error"}},
		{name: "a TTL without a value", args: acquire("--ttl"), code: exitUsage,
			want: `--ttl needs a value: a duration such as 30s$`,
			old:  []string{"flag needs an argument"}},
		{name: "no TTL", args: acquire(), code: exitUsage, want: `--ttl is required: a duration such as 30s$`},
		{name: "a timeout below the tick", args: acquire("--ttl", "1s", "--timeout", "1ns"), code: exitUsage,
			want: `--timeout 1ns is below a millisecond, the stores' tick: want 1ms or more, such as 10s$`},
		{name: "an epoch of zero", args: []string{"release", "held", store, "--holder", "worker-a", "--epoch", "0"}, code: exitUsage,
			want: `--epoch 0: want the lease's epoch, 1 or more, as holders prints it$`,
			old:  []string{"--epoch is required"}},
		{name: "an epoch that is no number", args: []string{"release", "held", store, "--holder", "worker-a", "--epoch", "one"}, code: exitUsage,
			want: `--epoch "one": want a whole number$`,
			old:  []string{"parse error"}},
		{name: "a bool that is neither", args: []string{"holders", store, "--json=maybe"}, code: exitUsage,
			want: `--json "maybe": want true or false$`,
			old:  []string{"parse error"}},
		{name: "an empty holder", args: acquire("--ttl", "1s", "--holder="), code: exitUsage,
			want: `--holder "" is empty: want a name$`,
			old:  []string{"--holder is required"}},
		{name: "a holder's name with a newline", args: []string{"acquire", "r", store, "--holder", "worker\nb", "--ttl", "1s"}, code: exitUsage,
			want: `invalid input: holder "worker\\nb" has the control character U\+000A at byte 6$`},
		{name: "a name of spaces", args: []string{"acquire", "   ", store, "--holder", "h", "--ttl", "1s"}, code: exitUsage,
			want: `invalid input: resource "   " is only white space$`},

		{name: "a renewal by another holder at the lease's epoch",
			args: []string{"renew", "held", store, "--holder", "worker-b", "--epoch", "1", "--ttl", "1s"}, code: exitRefused,
			want: `not the lease holder: "held" is held by "worker-a" at epoch 1, not by "worker-b" at epoch 1$`,
			old:  []string{`is at epoch 1, not "worker-b"'s epoch 1`}},

		{name: "a directory for the SQLite file", args: []string{"holders", "--sqlite", aDir}, code: exitUsage,
			want: regexp.QuoteMeta(aDir+" is not a regular file ("+info.Mode().String()+")") + `$`,
			old:  []string{"(d---------)"}},
		{name: "a SQLite file in no directory", args: []string{"acquire", "r", "--sqlite", filepath.Join(dir, "missing", "l.db"), "--holder", "h", "--ttl", "1s"},
			code: exitUsage, want: `^leases: acquire: open \S+l\.db: no such directory \S+missing$`, old: unopenable},
		{name: "a SQLite file where a file is the directory", args: []string{"acquire", "r", "--sqlite", filepath.Join(db, "l.db"), "--holder", "h", "--ttl", "1s"},
			code: exitUsage, want: `is not a directory \(-rw`, old: unopenable},
		{name: "a SQLite file in a directory this process may not write", run: deniedDirectory,
			args: []string{"acquire", "r", "--holder", "h", "--ttl", "1s"},
			code: exitUsage, want: `^leases: acquire: open \S+: permission denied: this process may not create a file in \S+$`, old: unopenable},

		{name: "a margin below the tick", args: []string{"run", "r", store, "--margin", "1ns", "--", "true"}, code: exitUsage,
			want: `^leases: run: --margin 1ns is below a millisecond, the stores' tick: want 1ms or more, such as 5s$`},
		{name: "a margin of zero", args: []string{"run", "r", store, "--margin", "0s", "--", "true"}, code: exitUsage,
			want: `--margin 0s is zero: want a duration of 1ms or more, such as 5s$`},

		{name: "an etcd endpoint that is no URL", args: []string{"holders", "--etcd", "not a url"}, code: exitUsage,
			want: `^leases: holders: etcd endpoint "not a url" is not host:port \(.*\); want host:port or http://host:port$`,
			old:  []string{"Options.CallTimeout"}},
		{name: "an https etcd endpoint", args: []string{"holders", "--etcd", "https://127.0.0.1:2379"}, code: exitUsage,
			want: `etcd endpoint "https://127.0.0.1:2379": https, but TLS is not wired into leases`,
			old:  []string{"Options.CallTimeout"}},
		{name: "an etcd endpoint of another scheme", args: []string{"holders", "--etcd", "127.0.0.1:2379,unix:///run/etcd.sock"}, code: exitUsage,
			want: `etcd endpoint "unix:///run/etcd.sock": scheme "unix"; want host:port or http://host:port$`},
		{name: "an etcd endpoint nothing listens on", args: []string{"holders", "--etcd", "http://" + dead, "--timeout", "1500ms"}, code: exitFailed,
			want: `\(--timeout 1.5s passed; etcd at http://` + regexp.QuoteMeta(dead) + `: dial tcp ` + regexp.QuoteMeta(dead) + `: .*refused\)$`,
			old:  []string{"Options.CallTimeout"}, atLeast: 1500 * time.Millisecond},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			run := tc.run
			if run == nil {
				run = func(t *testing.T, args []string) result { return invoke(t, nil, args...) }
			}
			began := time.Now()
			r := run(t, tc.args)
			took := time.Since(began)
			line := strings.TrimSuffix(r.Stderr, "\n")
			if r.Code != tc.code || strings.Contains(line, "\n") || !regexp.MustCompile(tc.want).MatchString(line) {
				t.Fatalf("%q: %v; want exit %d and one line matching %q", tc.args, r, tc.code, tc.want)
			}
			for _, old := range tc.old {
				if strings.Contains(r.Stderr, old) {
					t.Fatalf("%q: %q says %q again", tc.args, r.Stderr, old)
				}
			}
			if took < tc.atLeast {
				t.Fatalf("%q: ended after %v, before its --timeout %v", tc.args, took, tc.atLeast)
			}
		})
	}
}

// deadPort is a loopback address nothing listens on: a port that was
// bound, and is no longer.
func deadPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// deniedDirectory runs the command with --sqlite naming a file in a
// directory this process may not write: made so with chmod, or, where
// that binds no one (root, Windows), on Linux by strace, whose injected
// EACCES is what the creation of the file then meets.
func deniedDirectory(t *testing.T, args []string) result {
	dir := filepath.Join(t.TempDir(), "locked")
	if err := os.Mkdir(dir, 0o500); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "leases.db")
	args = append(args, "--sqlite", path)
	if os.Getuid() > 0 {
		return invoke(t, nil, args...)
	}
	return withoutPermission(t, path, args)
}
