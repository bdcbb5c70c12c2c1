package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver

	"leases/postgres"
)

// The PostgreSQL store: each decision reads the server's clock inside its
// transaction (postgres.Store.Lessor); --prefix chooses the tables.
func init() {
	register(&backend{
		name:   "postgres",
		arg:    "DSN",
		help:   "a PostgreSQL database, its connection string (host=... dbname=... or postgres://...), timed by the server's clock",
		clock:  "the PostgreSQL server's clock",
		note:   "the PostgreSQL server's clock, which decides the leases",
		prefix: "the prefix of the tables' names (default " + postgres.DefaultPrefix + ")",
		open:   openPostgres,
	})
}

func openPostgres(ctx context.Context, dsn string, o openOptions) (*store, error) {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return nil, usagef("--postgres: %v", err)
	}
	s, err := postgres.New(db, postgres.Options{Prefix: o.prefix})
	if err == nil {
		if o.create {
			err = s.Create(ctx)
		} else {
			err = leasesTable(ctx, db, o.prefix)
		}
	}
	if err != nil {
		return nil, errors.Join(err, db.Close())
	}
	return &store{raw: s.Lessor(), close: db.Close}, nil
}

// leasesTable refuses a database without the store's table of leases, as
// for a SQLite file that is not there: a mistyped database or prefix is
// an error, not an empty store.
func leasesTable(ctx context.Context, db *sql.DB, prefix string) error {
	if prefix == "" {
		prefix = postgres.DefaultPrefix
	}
	table := prefix + "authority" // a plain identifier: postgres.New checked it
	var found sql.NullString
	if err := db.QueryRowContext(ctx, `SELECT to_regclass($1)::text`, `"`+table+`"`).Scan(&found); err != nil {
		return fmt.Errorf("look for the table %s: %w", table, err)
	}
	if !found.Valid {
		return usagef("no table %s in this database (only acquire and run create it)", table)
	}
	return nil
}
