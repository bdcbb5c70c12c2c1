package postgres_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"leases"
	"leases/postgres"
	"leases/postgres/pgtest"
	"leases/testkit/fairtest"
)

// contender is this binary re-executed as one of the processes that
// contend for one resource: its arguments are the server's DSN and the
// tables' prefix.
var contender = fairtest.Role("postgres-fair-contender", func(ctx context.Context, args []string) (leases.Lessor, func() error, error) {
	db, err := sql.Open("pgx", args[0])
	if err != nil {
		return nil, nil, err
	}
	s, err := postgres.New(db, postgres.Options{Prefix: args[1]})
	if err != nil {
		return nil, nil, errors.Join(err, db.Close())
	}
	return s.Lessor(), db.Close, nil
})

// Six processes, each with a pool of its own, wait for one resource, each
// releasing it and at once waiting again (docs/performance.md has the
// figures).
func TestSixProcessesTakeTurns(t *testing.T) {
	server := database(t, 0)
	s := newStore(t, server.DB, postgres.Options{})
	prefix := s.Tables()[0][:len(s.Tables()[0])-len("authority")]
	f := fairtest.Run(t, contender, fairtest.Config{}, pgtest.Shared(t).DSN("postgres"), prefix)
	t.Log(f)
	fairtest.Check(t, f)
}

// The Lessor grants a resource to its waiters in the order they were
// first refused.
func TestLessorGrantsInArrivalOrder(t *testing.T) {
	fairtest.CheckLine(t, newStore(t, database(t, 0).DB, postgres.Options{}).Lessor(), time.Hour)
}
