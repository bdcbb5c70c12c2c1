package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"leases/clock"
	"leases/sqlite"
	"leases/testkit/sqlitetest"
	"leases/testkit/testctx"
)

// Every exit status, for each command that can give it, on SQLite, with
// its one-line message; and a refusal or bad input changes nothing.
// (TestMessages has the messages of bad flag values and paths.)
func TestExitStatuses(t *testing.T) {
	db := sqliteFile(t)
	store := "--sqlite=" + db
	if r := invoke(t, nil, "acquire", "held", store, "--holder", "alice", "--ttl", "1h"); r.Code != exitOK {
		t.Fatalf("setup: %v", r)
	}
	notADatabase := filepath.Join(t.TempDir(), "garbage.db")
	if err := os.WriteFile(notADatabase, []byte(strings.Repeat("not a database. ", 512)), 0o600); err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name string
		env  map[string]string
		args []string
		code int
		// stderr is a pattern the one line of stderr must match.
		stderr string
	}{
		{"no arguments", nil, nil, exitUsage, `^Usage: leases COMMAND`},
		{"help", nil, []string{"-h"}, exitOK, `^$`},
		{"a command's help", nil, []string{"run", "-h"}, exitOK, `^$`},
		{"unknown command", nil, []string{"steal", "held", store}, exitUsage, `unknown command "steal"`},
		{"unknown flag", nil, []string{"holders", store, "--force"}, exitUsage, `flag provided but not defined: -force`},
		{"no store", nil, []string{"holders"}, exitUsage, `no store: give --etcd ENDPOINTS \[--prefix P\] or --postgres DSN \[--prefix P\] or --sqlite PATH, or set LEASES_STORE`},
		{"two stores", nil, []string{"holders", store, "--etcd", "127.0.0.1:1"}, exitUsage, `more than one store`},
		{"prefix without etcd", nil, []string{"holders", store, "--prefix", "/x/"}, exitUsage, `--prefix is for --etcd and --postgres; the store is --sqlite`},
		{"bad LEASES_STORE", map[string]string{storeEnv: "mysql:x"}, []string{"holders"}, exitUsage, `LEASES_STORE="mysql:x": want one of`},
		{"no timeout", nil, []string{"holders", store, "--timeout", "0s"}, exitUsage, `--timeout 0s`},
		{"holders of a file that is not there", nil, []string{"holders", "--sqlite", db + ".typo"}, exitUsage, `no SQLite file at`},
		{"acquire without a holder", nil, []string{"acquire", "r", store, "--ttl", "1s"}, exitUsage, `--holder is required`},
		{"acquire without a ttl", nil, []string{"acquire", "r", store, "--holder", "h"}, exitUsage, `--ttl is required`},
		{"acquire of two resources", nil, []string{"acquire", "r", "s", store, "--holder", "h", "--ttl", "1s"}, exitUsage, `want one RESOURCE, got 2`},
		{"acquire of an empty name", nil, []string{"acquire", "", store, "--holder", "h", "--ttl", "1s"}, exitUsage, `invalid input: resource is empty`},
		{"acquire of an over-long name", nil, []string{"acquire", strings.Repeat("r", 257), store, "--holder", "h", "--ttl", "1s"}, exitUsage, `invalid input: resource is 257 bytes`},
		{"release without an epoch", nil, []string{"release", "held", store, "--holder", "alice"}, exitUsage, `--epoch is required`},
		{"run without CMD", nil, []string{"run", "r", store}, exitUsage, `no CMD: give it after --`},
		{"run of a CMD that is not there", nil, []string{"run", "r", store, "--", "no-such-command-here"}, exitUsage, `CMD "no-such-command-here"`},
		{"run with a grace that does not fit before the deadline", nil, []string{"run", "r", store, "--ttl", "10s", "--grace", "4s", "--", "true"}, exitUsage,
			"--grace 4s does not fit before the session's deadline: SIGTERM would come less than 3.99s after a renewal was sent"},
		{"run with a margin as long as the TTL", nil, []string{"run", "r", store, "--ttl", "10s", "--margin", "10s", "--", "true"}, exitUsage, `--margin 10s is not below --ttl 10s`},

		{"acquire of a held lease", nil, []string{"acquire", "held", store, "--holder", "bob", "--ttl", "1s"}, exitRefused, `"held" is held by "alice" at epoch 1 for (59m5\ds|1h0m0s) more \(until .*, this machine's clock\): lease held$`},
		{"acquire again by the holder", nil, []string{"acquire", "held", store, "--holder", "alice", "--ttl", "1s"}, exitRefused, `is held by "alice"`},
		{"renew by another", nil, []string{"renew", "held", store, "--holder", "bob", "--epoch", "1", "--ttl", "1s"}, exitRefused, `not the lease holder`},
		{"renew of another epoch", nil, []string{"renew", "held", store, "--holder", "alice", "--epoch", "2", "--ttl", "1s"}, exitRefused, `not the lease holder`},
		{"release by another", nil, []string{"release", "held", store, "--holder", "bob", "--epoch", "1"}, exitRefused, `not the lease holder`},
		{"release of a lease never granted", nil, []string{"release", "never", store, "--holder", "bob", "--epoch", "1"}, exitRefused, `was never leased`},
		{"run on a held lease without --wait", nil, []string{"run", "held", store, "--", "true"}, exitRefused, `"held" is held by "alice" at epoch 1 for another`},

		{"a file that is not a database", nil, []string{"holders", "--sqlite", notADatabase}, exitFailed, `file is not a database`},
		{"etcd that does not answer", nil, []string{"holders", "--etcd", "127.0.0.1:1", "--timeout", "200ms"}, exitFailed, `--timeout 200ms passed`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := invoke(t, tc.env, tc.args...)
			if r.Code != tc.code {
				t.Fatalf("%q: %v; want exit %d", tc.args, r, tc.code)
			}
			line := strings.TrimSuffix(r.Stderr, "\n")
			if tc.code != exitOK && tc.code != exitUsage || len(tc.args) > 0 {
				if strings.Contains(line, "\n") {
					t.Fatalf("%q: stderr is more than one line: %q", tc.args, r.Stderr)
				}
			}
			if !regexp.MustCompile(tc.stderr).MatchString(line) {
				t.Fatalf("%q: stderr %q; want it to match %q", tc.args, r.Stderr, tc.stderr)
			}
			if tc.code != exitOK && r.Stdout != "" {
				t.Fatalf("%q: stdout %q; want nothing when it fails", tc.args, r.Stdout)
			}
		})
	}
	// Nothing above changed anything: alice still holds epoch 1, and
	// nothing else is held.
	var got holdersJSON
	if r := invoke(t, nil, "holders", store, "--json"); r.Code != exitOK || json.Unmarshal([]byte(r.Stdout), &got) != nil ||
		len(got.Leases) != 1 || got.Leases[0].Holder != "alice" || got.Leases[0].Epoch != 1 {
		t.Fatalf("after the refusals and bad input: %v; want alice's epoch 1 alone", r)
	}
}

// acquire, holders, renew and release, each as a script uses it (--json)
// and as an operator reads it; the store given by LEASES_STORE.
func TestExplicitOperations(t *testing.T) {
	ctx := testctx.Context(t)
	db := sqliteFile(t)
	env := map[string]string{storeEnv: "sqlite:" + db}
	run := func(args ...string) result {
		t.Helper()
		r := invoke(t, env, args...)
		if r.Code != exitOK || r.Stderr != "" {
			t.Fatalf("%q: %v; want success and nothing on stderr", args, r)
		}
		return r
	}
	lease := func(r result) leaseJSON {
		t.Helper()
		var l leaseJSON
		if err := json.Unmarshal([]byte(r.Stdout), &l); err != nil || l.ExpiresInMs == nil {
			t.Fatalf("not a lease: %q (%v)", r.Stdout, err)
		}
		return l
	}

	empty, err := sqlite.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if err := empty.Close(); err != nil {
		t.Fatal(err)
	}
	if r := run("holders"); r.Stdout != "no live leases (times: this machine's clock, which decides the SQLite file's leases)\n" {
		t.Fatalf("holders of an empty file: %q", r.Stdout)
	}
	a := lease(run("acquire", "jobs/a", "--holder", "alice", "--ttl", "1h", "--json"))
	if a.Resource != "jobs/a" || a.Holder != "alice" || a.Epoch != 1 || *a.ExpiresInMs != time.Hour.Milliseconds() ||
		a.Clock != "this machine's clock" {
		t.Fatalf("acquire: %+v; want jobs/a for alice at epoch 1, for an hour, on this machine's clock", a)
	}
	line := run("acquire", "jobs/b", "--holder", "bob", "--ttl", "90s").Stdout
	if !regexp.MustCompile(`^acquired jobs/b for bob: epoch 1, expires in 1m30s at \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}(Z|[+-]\d\d:\d\d) \(this machine's clock\)\n$`).MatchString(line) {
		t.Fatalf("acquire's line: %q", line)
	}

	table := run("holders").Stdout
	want := `^RESOURCE +HOLDER +EPOCH +EXPIRES IN +EXPIRES AT\n` +
		`jobs/a +alice +1 +(59m5\ds|1h0m0s) +\S+\n` +
		`jobs/b +bob +1 +1m\d\d?s +\S+\n` +
		`times: this machine's clock, which decides the SQLite file's leases\n$`
	if !regexp.MustCompile(want).MatchString(table) {
		t.Fatalf("holders:\n%s\nwant it to match\n%s", table, want)
	}
	var listed holdersJSON
	if err := json.Unmarshal([]byte(run("holders", "jobs/b", "jobs/c", "--json").Stdout), &listed); err != nil ||
		listed.Store != "sqlite" || listed.AtTheLatest || len(listed.Leases) != 1 || listed.Leases[0].Holder != "bob" ||
		*listed.Leases[0].ExpiresInMs > 90_000 || len(listed.Free) != 1 || listed.Free[0] != "jobs/c" {
		t.Fatalf("holders jobs/b jobs/c: %+v, %v; want bob's lease and jobs/c free", listed, err)
	}

	renewed := lease(run("renew", "jobs/b", "--holder", "bob", "--epoch", "1", "--ttl", "2h", "--json"))
	if renewed.Epoch != 1 || *renewed.ExpiresInMs <= time.Hour.Milliseconds() {
		t.Fatalf("renew for 2h: %+v", renewed)
	}
	if r := run("release", "jobs/b", "--holder", "bob", "--epoch", "1"); r.Stdout != "released jobs/b (bob, epoch 1)\n" {
		t.Fatalf("release: %q", r.Stdout)
	}
	if r := invoke(t, env, "release", "jobs/b", "--holder", "bob", "--epoch", "1"); r.Code != exitRefused {
		t.Fatalf("a second release: %v; want refused", r)
	}
	if again := lease(run("acquire", "jobs/b", "--holder", "carol", "--ttl", "1s", "--json")); again.Epoch != 2 {
		t.Fatalf("acquire after the release: %+v; want epoch 2, never 1 again", again)
	}

	// A lease that ran out on the store's clock can no longer be renewed
	// or released: wait for that clock (the machine's) to pass it.
	short := lease(run("acquire", "jobs/short", "--holder", "dan", "--ttl", "1ms", "--json"))
	expiry, err := time.Parse(time.RFC3339Nano, short.ExpiresAt)
	if err != nil {
		t.Fatal(err)
	}
	if err := (clock.Wall{}).Wait(ctx, expiry.UnixMilli()); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"renew", "jobs/short", "--holder", "dan", "--epoch", "1", "--ttl", "1s"},
		{"release", "jobs/short", "--holder", "dan", "--epoch", "1"},
	} {
		if r := invoke(t, env, args...); r.Code != exitRefused || !strings.Contains(r.Stderr, "lease expired") {
			t.Fatalf("%q after the expiry: %v; want refused, expired", args, r)
		}
	}
	if r := run("holders", "--json"); strings.Contains(r.Stdout, "jobs/short") {
		t.Fatalf("holders lists the expired lease: %s", r.Stdout)
	}
}

// Every command's -h says what it does, where the leases may be, its
// flags and the exit statuses, on stdout, and exits 0.
func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"help"}, {"holders", "-h"}, {"acquire", "-h"}, {"renew", "--help"}, {"release", "-h"}, {"run", "-h"}} {
		r := invoke(t, nil, args...)
		if r.Code != exitOK || r.Stderr != "" || !strings.Contains(r.Stdout, exitStatuses) ||
			!strings.Contains(r.Stdout, "--sqlite PATH") || !strings.Contains(r.Stdout, "--etcd ENDPOINTS [--prefix P]") ||
			!strings.Contains(r.Stdout, "--postgres DSN [--prefix P]") {
			t.Errorf("%q: %v; want the help, the stores and the exit statuses", args, r)
		}
	}
}

// docs/operators.md shows leases -h as it is.
func TestOperatorsPageShowsTheHelp(t *testing.T) {
	page, err := os.ReadFile(filepath.Join("..", "..", "docs", "operators.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(page), "```text\n"+mainUsage()+"```\n") {
		t.Fatalf("docs/operators.md does not show leases -h as it is now:\n%s", mainUsage())
	}
}

// A store may hold names from before the name rule, with a tab or a
// newline (written here behind the library's back): holders shows each
// lease on a line of its own, such a name quoted with its escapes, and
// the columns stay columns.
func TestHoldersShowsEachLeaseOnOneLine(t *testing.T) {
	db := sqliteFile(t)
	store := "--sqlite=" + db
	for _, r := range []string{"plain", "tabbed"} {
		if res := invoke(t, nil, "acquire", r, store, "--holder", "h", "--ttl", "1h"); res.Code != exitOK {
			t.Fatal(res)
		}
	}
	direct := sqlitetest.OpenDirectly(t, db)
	if _, err := direct.Exec(`UPDATE authority_leases SET resource = 'a' || char(9) || 'b', holder = 'x' || char(10) || 'y' WHERE resource = 'tabbed'`); err != nil {
		t.Fatal(err)
	}
	if err := direct.Close(); err != nil {
		t.Fatal(err)
	}
	r := invoke(t, nil, "holders", store)
	want := `^RESOURCE +HOLDER +EPOCH +EXPIRES IN +EXPIRES AT\n` +
		`"a\\tb" +"x\\ny" +1 +\S+ +\S+\n` +
		`plain +h +1 +\S+ +\S+\n` +
		`times: .*\n$`
	if r.Code != exitOK || !regexp.MustCompile(want).MatchString(r.Stdout) {
		t.Fatalf("holders: %v; want each lease on one line of five columns, the names quoted", r)
	}
}
