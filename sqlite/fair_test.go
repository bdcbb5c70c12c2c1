package sqlite_test

import (
	"context"
	"testing"

	"leases"
	"leases/sqlite"
	"leases/testkit/fairtest"
	"leases/testkit/sqlitetest"
)

// contender is this binary re-executed as one of the processes that
// contend for one resource of a file (its one argument).
var contender = fairtest.Role("sqlite-fair-contender", func(ctx context.Context, args []string) (leases.Lessor, func() error, error) {
	s, err := sqlite.Open(ctx, args[0])
	if err != nil {
		return nil, nil, err
	}
	return s.Lessor(), s.Close, nil
})

// Six processes wait for one resource of a file, each releasing it and
// at once waiting again (docs/performance.md has the figures).
func TestSixProcessesTakeTurns(t *testing.T) {
	path := sqlitetest.Path(t)
	sqlitetest.Open(t, path) // the tables, before the contenders race to make them
	f := fairtest.Run(t, contender, fairtest.Config{}, path)
	t.Log(f)
	fairtest.Check(t, f)
}
