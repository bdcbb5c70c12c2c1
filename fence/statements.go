package fence

import "strings"

// The accepting conditions of the receiver rule (package internal/rules'
// Write and Observe, fenced) for a resource that already has a row, in
// SQL: "stored" is the row as it is committed now, "excluded" the row the
// statement offers. A resource without a row always accepts: that is the
// upsert's INSERT. The test that holds them to the rule is
// testkit/fencetest's Rule, run on both databases.
const (
	// A higher epoch, or the observed epoch's first value: the fence was
	// raised by an observe ahead of its holder's first write, so the
	// stored value came with a lower epoch (or there is none).
	acceptWrite = `excluded.epoch > stored.epoch
		OR (excluded.epoch = stored.epoch AND COALESCE(stored.value_epoch, 0) < stored.epoch)`
	// Only a higher epoch raises the fence.
	acceptObserve = `excluded.epoch > stored.epoch`
	// A transaction of the newest tenure, or of a newer one, is admitted;
	// one of an older tenure is not.
	acceptAdmit = `excluded.epoch >= stored.epoch`
)

// The statements of both dialects: {table} is the table's name, $n the
// n-th argument, and the schema's {braces} are the dialect's types.
const (
	createTemplate = `CREATE TABLE IF NOT EXISTS "{table}" (
	resource    {text} NOT NULL PRIMARY KEY,
	epoch       {integer} NOT NULL CHECK (epoch >= 1),
	value_epoch {integer} CHECK (value_epoch >= 1),
	value       {text},
	-- the marker of admitted transactions (Tenure.Resolve reads it):
	tx_seq      {integer} NOT NULL DEFAULT 0, -- transactions admitted, counted
	tx_tag      {integer},                    -- the last one's tag
	prev_epoch  {integer},                    -- the marker as it stood when the fence
	prev_seq    {integer},                    -- last rose to a newer epoch: the final
	prev_tag    {integer},                    -- marker of the tenure before
	tx_final    {integer} NOT NULL DEFAULT 0, -- rewritten by Tenure.Resolve (SQLite)
	CHECK ((value IS NULL) = (value_epoch IS NULL) AND value_epoch <= epoch)
){strict}`

	// The compare-and-set: one statement that inserts the resource's
	// first row, or replaces the row only where the rule accepts; it
	// affects one row when it stored, none when the rule refused (both
	// databases count a DO UPDATE whose WHERE is false as no row). In
	// PostgreSQL the DO UPDATE branch locks the conflicting row, waiting
	// for a transaction that holds it, and evaluates the WHERE on the
	// latest committed version, also under READ COMMITTED; the row stays
	// locked when the WHERE is false. Under REPEATABLE READ and
	// SERIALIZABLE, a row changed after the snapshot fails the statement
	// (40001) instead. In SQLite the statement runs as the one writer, on
	// the latest version.
	writeTemplate = `INSERT INTO "{table}" AS stored (resource, epoch, value_epoch, value)
	VALUES ($1, $2, $2, $3)
	ON CONFLICT (resource) DO UPDATE
		SET epoch = excluded.epoch, value_epoch = excluded.value_epoch, value = excluded.value
		WHERE ` + acceptWrite

	// Raises the fence and keeps the value, under the same locking as
	// writeTemplate, and returns the row only when it stored it: the
	// value it kept is part of the observe's answer.
	observeTemplate = `INSERT INTO "{table}" AS stored (resource, epoch)
	VALUES ($1, $2)
	ON CONFLICT (resource) DO UPDATE
		SET epoch = excluded.epoch, prev_epoch = stored.epoch, prev_seq = stored.tx_seq, prev_tag = stored.tx_tag
		WHERE ` + acceptObserve + `
	RETURNING epoch, value_epoch, value`

	// Admits a transaction for the holder of an epoch: raises the fence
	// to it, or sets it to what it is (so that the row is written, and
	// locked until the transaction ends, also when the fence was at the
	// epoch already), and returns the row when it did, with the marker
	// that tells later whether this transaction committed (see markers):
	// the row's count of admitted transactions, one more, and the tag $3.
	admitTemplate = `INSERT INTO "{table}" AS stored (resource, epoch, tx_seq, tx_tag)
	VALUES ($1, $2, 1, $3)
	ON CONFLICT (resource) DO UPDATE
		SET epoch = excluded.epoch, tx_seq = stored.tx_seq + 1, tx_tag = excluded.tx_tag,
			prev_epoch = CASE WHEN excluded.epoch > stored.epoch THEN stored.epoch ELSE stored.prev_epoch END,
			prev_seq = CASE WHEN excluded.epoch > stored.epoch THEN stored.tx_seq ELSE stored.prev_seq END,
			prev_tag = CASE WHEN excluded.epoch > stored.epoch THEN stored.tx_tag ELSE stored.prev_tag END
		WHERE ` + acceptAdmit + `
	RETURNING epoch, value_epoch, value, tx_seq`

	readTemplate = `SELECT epoch, value_epoch, value FROM "{table}" WHERE resource = $1`

	// FOR UPDATE (PostgreSQL only) reads the row a write or observe was
	// rejected by. The rejecting upsert has locked that row already, so
	// the row cannot have changed since; the lock is taken again here so
	// that the classification never rests on a row another transaction
	// may still change, whatever a later version of the upsert does.
	lockClause = ` FOR UPDATE`
	// shareClause (PostgreSQL only) waits for a transaction that holds
	// the row, and keeps it from changing until the reader's ends.
	shareClause = ` FOR SHARE`

	// markTemplate reads the markers of a resource's row for
	// Tenure.Resolve, on PostgreSQL under a share lock: it waits for the
	// transaction to resolve, which holds the row's lock (its admit
	// wrote the row) until it ends.
	markTemplate = `SELECT epoch, tx_seq, tx_tag, prev_epoch, prev_seq, prev_tag FROM "{table}" WHERE resource = $1{share}`
	// finalTemplate (SQLite) rewrites the row, so that the frames of a
	// commit that failed to be indexed (an fsync that failed) lie behind a
	// newer commit in the log and no later recovery brings them back; the
	// bytes must change, for SQLite writes no page for an UPDATE that
	// stores what the row holds (TestResolveAnswerHoldsAfterRecovery).
	finalTemplate = `UPDATE "{table}" SET tx_final = tx_final + 1 WHERE resource = $1`
)

// The marker of an admitted transaction, the same on both databases:
// each admit counts the row's admitted transactions (tx_seq) and tags the
// row with a random number of its own (tx_tag), so that a transaction of
// epoch e committed when the row's marker of e holds its count and its
// tag, and did not when the count is below it, or is its count with
// another tag (a later transaction that took its place). The row's
// marker of e is tx_seq and tx_tag while the row is at e, and prev_seq
// and prev_tag once a newer tenure has begun (prev_epoch is e): no
// transaction of e commits after that, so the marker is final.
// PostgreSQL's own record of a transaction (pg_xact_status) is not used:
// after a crash the server can hand a transaction's id, if the WAL that
// used it had not reached the disk, to a new transaction, whose fate it
// then reports (seen in the chaos test, two in one 90 s run).

// statements are one table's SQL, in one dialect.
type statements struct {
	create, write, observe, admit, read, readRejecting string
	// Tenure.Resolve's statements.
	mark, final string
}

func newStatements(dialect Dialect, table string) statements {
	schema := strings.NewReplacer("{table}", table, "{integer}", "bigint", "{text}", "text", "{strict}", "")
	dml := strings.NewReplacer("{table}", table)
	lock, share := lockClause, shareClause
	if dialect == SQLite {
		schema = strings.NewReplacer("{table}", table, "{integer}", "INTEGER", "{text}", "TEXT", "{strict}", " STRICT")
		// SQLite's ?NNN is a numbered placeholder like PostgreSQL's $NNN.
		dml = strings.NewReplacer("{table}", table, "$", "?")
		// SQLite has no row locks: the one writer holds the whole file.
		lock, share = "", ""
	}
	return statements{
		create:        schema.Replace(createTemplate),
		write:         dml.Replace(writeTemplate),
		observe:       dml.Replace(observeTemplate),
		admit:         dml.Replace(admitTemplate),
		read:          dml.Replace(readTemplate),
		readRejecting: dml.Replace(readTemplate + lock),
		mark:          strings.Replace(dml.Replace(markTemplate), "{share}", share, 1),
		final:         dml.Replace(finalTemplate),
	}
}

// all are the statements a table compiles.
func (s statements) all() []string {
	return []string{s.write, s.observe, s.admit, s.read, s.readRejecting, s.mark, s.final}
}
