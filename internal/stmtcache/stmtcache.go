// Package stmtcache keeps a table's statements compiled on its database,
// for package fence's table and package ops' record, which both run
// statements that cost more to parse than to run.
package stmtcache

import (
	"context"
	"database/sql"
	"errors"
	"sync"
)

// Cache holds a table's statements compiled on its database. Some
// drivers parse every statement they are handed as text (modernc.org/sqlite
// does; the pgx driver keeps a cache of its own), and the fence's upsert
// costs more to parse than to run: measured on SQLite in memory, a
// transaction with a compiled fence Write took about a third of the time
// of one with the text. They are compiled outside any transaction (by
// Create, and before a tenure begins: a database of one connection, as
// SQLite's are, would otherwise wait for itself), and a statement not
// compiled yet runs as text.
type Cache struct {
	db     *sql.DB
	mu     sync.Mutex
	byText map[string]*sql.Stmt
}

// New is an empty cache of statements compiled on db.
func New(db *sql.DB) *Cache { return &Cache{db: db} }

// Prepare compiles texts that are not compiled yet; one that fails (the
// table is not there yet) runs as text until a later prepare.
func (c *Cache) Prepare(ctx context.Context, texts []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byText == nil {
		c.byText = map[string]*sql.Stmt{}
	}
	for _, text := range texts {
		if c.byText[text] != nil {
			continue
		}
		if stmt, err := c.db.PrepareContext(ctx, text); err == nil {
			c.byText[text] = stmt
		}
	}
}

func (c *Cache) get(text string) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byText[text]
}

// Exec runs text in tx, compiled if it is.
func (c *Cache) Exec(ctx context.Context, tx *sql.Tx, text string, args ...any) (sql.Result, error) {
	if stmt := c.get(text); stmt != nil {
		return tx.StmtContext(ctx, stmt).ExecContext(ctx, args...)
	}
	return tx.ExecContext(ctx, text, args...)
}

// QueryRow runs the query text in tx, compiled if it is.
func (c *Cache) QueryRow(ctx context.Context, tx *sql.Tx, text string, args ...any) *sql.Row {
	if stmt := c.get(text); stmt != nil {
		return tx.StmtContext(ctx, stmt).QueryRowContext(ctx, args...)
	}
	return tx.QueryRowContext(ctx, text, args...)
}

// Close releases the compiled statements.
func (c *Cache) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for text, stmt := range c.byText {
		errs = append(errs, stmt.Close())
		delete(c.byText, text)
	}
	return errors.Join(errs...)
}
