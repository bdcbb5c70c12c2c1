package fence_test

import (
	"errors"
	"strings"
	"testing"

	"leases"
	"leases/fence"
)

func TestNewRefusesAllButPlainNames(t *testing.T) {
	for _, c := range []struct {
		dialect fence.Dialect
		name    string
		ok      bool
	}{
		{fence.SQLite, fence.DefaultTable, true},
		{fence.PostgreSQL, fence.DefaultTable, true},
		{fence.PostgreSQL, "_fence2", true},
		{fence.PostgreSQL, strings.Repeat("f", 63), true},
		{fence.PostgreSQL, strings.Repeat("f", 64), false}, // PostgreSQL would truncate it
		{fence.SQLite, "", true},                           // the zero value: DefaultTable
		{fence.SQLite, "Fence", false},                     // PostgreSQL folds unquoted names to lower case
		{fence.SQLite, "2fence", false},
		{fence.SQLite, "sqlite_fence", false},
		{fence.PostgreSQL, "fence-table", false},
		{fence.PostgreSQL, "public.fence", false},
		{fence.PostgreSQL, `fence"; DROP TABLE users; --`, false},
		{fence.PostgreSQL, "fence ", false},
		{fence.PostgreSQL, "zäune", false},
		// Each character class at its edges: a-z, 0-9 and _ are in, the
		// characters on either side of each range are out, and a name
		// may not start with either end of 0-9.
		{fence.SQLite, "az_09", true},
		{fence.SQLite, "fence`", false}, // just before a
		{fence.SQLite, "fence{", false}, // just after z
		{fence.SQLite, "fence/", false}, // just before 0
		{fence.SQLite, "fence:", false}, // just after 9
		{fence.SQLite, "0fence", false},
		{fence.SQLite, "9fence", false},
		{fence.SQLite, "_9fence", true},
		{fence.Dialect(0), fence.DefaultTable, true}, // the zero value: SQLite
		{fence.Dialect(3), fence.DefaultTable, false},
	} {
		t.Run(c.dialect.String()+" "+c.name, func(t *testing.T) {
			table, err := fence.New(nil, fence.Options{Dialect: c.dialect, Table: c.name})
			wantName, wantDialect := c.name, c.dialect
			if wantName == "" {
				wantName = fence.DefaultTable
			}
			if wantDialect == 0 {
				wantDialect = fence.SQLite
			}
			switch {
			case c.ok && err != nil:
				t.Fatalf("refused: %v", err)
			case c.ok && (table.Name() != wantName || table.Dialect() != wantDialect):
				t.Fatalf("table %q in %v, want %q in %v", table.Name(), table.Dialect(), wantName, wantDialect)
			case !c.ok && !errors.Is(err, leases.ErrInvalidInput):
				t.Fatalf("got %v, want %v", err, leases.ErrInvalidInput)
			case !c.ok && strings.Contains(err.Error(), "\n"):
				t.Fatalf("error is more than one line: %q", err)
			}
		})
	}
}
