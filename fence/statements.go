package fence

import "strings"

// The accepting conditions of the receiver rule (package internal/rules'
// Write and Observe, fenced) for a resource that already has a row, in
// SQL: "stored" is the row as it is committed now, "excluded" the row the
// statement offers. A resource without a row always accepts: that is the
// upsert's INSERT. The test that holds them to the rule is
// internal/fencetest's Rule, run on both databases.
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
	value       {text},{marker_columns}
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
		SET epoch = excluded.epoch
		WHERE ` + acceptObserve + `
	RETURNING epoch, value_epoch, value`

	// Admits a transaction for the holder of an epoch: raises the fence
	// to it, or sets it to what it is (so that the row is written, and
	// locked until the transaction ends, also when the fence was at the
	// epoch already), and returns the row when it did, with the marker
	// that tells later whether this transaction committed (see
	// markers).
	admitTemplate = `INSERT INTO "{table}" AS stored (resource, epoch{marker_insert})
	VALUES ($1, $2{marker_values})
	ON CONFLICT (resource) DO UPDATE
		SET epoch = excluded.epoch{marker_set}
		WHERE ` + acceptAdmit + `
	RETURNING epoch, value_epoch, value, {marker_returning}`

	readTemplate = `SELECT epoch, value_epoch, value FROM "{table}" WHERE resource = $1`

	// FOR UPDATE (PostgreSQL only) reads the row a write or observe was
	// rejected by. The rejecting upsert has locked that row already, so
	// the row cannot have changed since; the lock is taken again here so
	// that the classification never rests on a row another transaction
	// may still change, whatever a later version of the upsert does.
	lockClause = ` FOR UPDATE`

	// waitTemplate (PostgreSQL only) waits until no transaction holds the
	// resource's row: the lock of a transaction whose outcome is being
	// resolved.
	waitTemplate = `SELECT 1 FROM "{table}" WHERE resource = $1 FOR SHARE`
	// statusTemplate (PostgreSQL only) is the server's own record of a
	// transaction: committed, aborted, in progress, or NULL when it is
	// too old to be known.
	statusTemplate = `SELECT pg_catalog.pg_xact_status($1::pg_catalog.xid8)`
	// markTemplate (SQLite only) reads an admitted transaction's marker,
	// and finalTemplate rewrites the row with a new tag so that a commit
	// frame that failed to be indexed (an fsync that failed) can never be
	// recovered into the file by a later open: see resolveSQLite. The tag
	// must change: SQLite writes no page for an UPDATE that stores the
	// bytes the row holds, and SET tx_tag = tx_tag left the failed
	// commit's frames in the log for a recovery to bring back
	// (TestResolveAnswerHoldsAfterRecovery).
	markTemplate  = `SELECT tx_seq, tx_tag FROM "{table}" WHERE resource = $1`
	finalTemplate = `UPDATE "{table}" SET tx_tag = $2 WHERE resource = $1`
)

// The marker of an admitted transaction, by dialect. PostgreSQL keeps its
// own record of every transaction: the admit returns the transaction's
// id, and pg_xact_status says later what became of it. SQLite keeps none,
// so the row keeps one: each admit counts the row's admitted
// transactions (tx_seq) and tags the row with a random number of its own
// (tx_tag); a transaction committed when the row holds its count and its
// tag.
var markers = map[Dialect]struct{ columns, insert, values, set, returning string }{
	PostgreSQL: {returning: "pg_catalog.pg_current_xact_id()::text"},
	SQLite: {
		columns: `
	tx_seq      INTEGER NOT NULL DEFAULT 0, -- admitted transactions, counted
	tx_tag      INTEGER,                    -- the last admitted transaction's tag`,
		insert:    ", tx_seq, tx_tag",
		values:    ", 1, $3",
		set:       ", tx_seq = stored.tx_seq + 1, tx_tag = excluded.tx_tag",
		returning: "tx_seq",
	},
}

// statements are one table's SQL, in one dialect.
type statements struct {
	create, write, observe, admit, read, readRejecting string
	// resolve's statements: wait and status on PostgreSQL, mark and
	// final on SQLite.
	wait, status, mark, final string
}

func newStatements(dialect Dialect, table string) statements {
	m := markers[dialect]
	marker := strings.NewReplacer("{marker_columns}", m.columns, "{marker_insert}", m.insert,
		"{marker_values}", m.values, "{marker_set}", m.set, "{marker_returning}", m.returning)
	schema := strings.NewReplacer("{table}", table, "{integer}", "bigint", "{text}", "text", "{strict}", "")
	dml := strings.NewReplacer("{table}", table)
	lock := lockClause
	if dialect == SQLite {
		schema = strings.NewReplacer("{table}", table, "{integer}", "INTEGER", "{text}", "TEXT", "{strict}", " STRICT")
		// SQLite's ?NNN is a numbered placeholder like PostgreSQL's $NNN.
		dml = strings.NewReplacer("{table}", table, "$", "?")
		// SQLite has no row locks: the one writer holds the whole file.
		lock = ""
	}
	return statements{
		create:        schema.Replace(marker.Replace(createTemplate)),
		write:         dml.Replace(writeTemplate),
		observe:       dml.Replace(observeTemplate),
		admit:         dml.Replace(marker.Replace(admitTemplate)),
		read:          dml.Replace(readTemplate),
		readRejecting: dml.Replace(readTemplate + lock),
		wait:          dml.Replace(waitTemplate),
		status:        statusTemplate,
		mark:          dml.Replace(markTemplate),
		final:         dml.Replace(finalTemplate),
	}
}
