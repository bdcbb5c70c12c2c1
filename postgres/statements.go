package postgres

import "strings"

// Lock modes of a decision on a lease row. They are PostgreSQL's row
// locks, chosen so that each waits only for what it must:
//
//   - a grant (Acquire) takes FOR UPDATE, which waits for every other
//     lock on the row, the key-share lock of a guarded transaction
//     included: a new tenure cannot begin while an older holder's guarded
//     transaction is open (see ServerClock.AdmitLive);
//   - a renewal or a release takes FOR NO KEY UPDATE: it waits for a
//     grant, a renewal or a release in progress, but not for the holder's
//     own guarded transactions, so that a holder's long transaction does
//     not hold back its own renewals;
//   - a guarded check takes FOR KEY SHARE, which waits only for a grant
//     in progress and lets any number of guarded transactions share the
//     row.
const (
	lockGrant = "FOR UPDATE"
	lockRenew = "FOR NO KEY UPDATE"
	lockGuard = "FOR KEY SHARE"
)

// serverClock is the server's clock in whole milliseconds since the Unix
// epoch, read when the expression is evaluated (clock_timestamp, not the
// transaction's start as now() would be).
const serverClock = `floor(extract(epoch FROM pg_catalog.clock_timestamp()) * 1000)::bigint`

// The statements of a store, {authority} and {unfenced} standing for its
// tables' names.
const (
	authoritySchema = `CREATE TABLE IF NOT EXISTS "{authority}" (
	resource   text NOT NULL PRIMARY KEY,
	epoch      bigint NOT NULL CHECK (epoch >= 1), -- the last epoch granted; never reused
	holder     text,                               -- NULL once released
	granted_at bigint NOT NULL,
	expires_at bigint NOT NULL,
	last_tick  bigint NOT NULL                     -- the last tick that changed the row
)`
	unfencedSchema = `CREATE TABLE IF NOT EXISTS "{unfenced}" (
	resource text NOT NULL PRIMARY KEY,
	epoch    bigint NOT NULL CHECK (epoch >= 1), -- the last write's epoch, not compared
	value    text NOT NULL
)`

	// readLeaseTemplate reads the resource's row, if any, and the server's
	// clock, in one statement; {lock} is a lock mode, or nothing. The row
	// is read in a subquery of its own, outer-joined to one row, so that
	// the statement returns one row whether the resource has one or not
	// (NULLs then), and the clock is evaluated in the outer row: after the
	// subquery has produced the row, that is after its lock was granted.
	// A clock read before the lock would be a time at which the decision
	// had not yet seen the row: a grant made meanwhile by another
	// transaction could then be judged expired at a time before its own
	// grant (TestTheServerClockIsReadAfterTheLock).
	readLeaseTemplate = `SELECT lease.epoch, lease.holder, lease.granted_at, lease.expires_at, lease.last_tick, ` + serverClock + `
	FROM (VALUES (1)) AS one (x) LEFT JOIN (
		SELECT epoch, holder, granted_at, expires_at, last_tick FROM "{authority}" WHERE resource = $1 {lock}
	) AS lease ON true`

	// Every decision stores the whole row that package rules decided on:
	// an update of the row it locked, or the resource's first row.
	updateLeaseTemplate = `UPDATE "{authority}"
	SET epoch = $2, holder = $3, granted_at = $4, expires_at = $5, last_tick = $6 WHERE resource = $1`
	// A first row that meets one another transaction inserted meanwhile
	// inserts nothing (and, under READ COMMITTED, waits for that
	// transaction first); the decision is then made again on that row.
	insertLeaseTemplate = `INSERT INTO "{authority}" (resource, epoch, holder, granted_at, expires_at, last_tick)
	VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (resource) DO NOTHING`

	// liveFunctionTemplate is the check at the commit of a tenure's
	// transaction (Store.Tenure): the function of a deferred constraint
	// trigger on the tenures' fence table, which every transaction of a
	// tenure writes (its admit), so that PostgreSQL runs it once the
	// transaction commits, after every statement of the user's. It reads
	// the lease's row and the server's clock then, and aborts the commit
	// unless the fence row's epoch is the resource's lease and has not
	// expired: with SQLSTATE LS001 when it expired, LS002 when the lease
	// is not the resource's any more. The transaction holds the lease
	// row's key-share lock (the admission took it), so no grant can come
	// between the check and the commit; a renewal can, and is seen under
	// READ COMMITTED.
	liveFunctionTemplate = `CREATE OR REPLACE FUNCTION "{live}"() RETURNS trigger LANGUAGE plpgsql AS $live$
DECLARE
	lease record;
	now_ms bigint;
BEGIN
	SELECT epoch, holder, expires_at, last_tick INTO lease FROM "{authority}" WHERE resource = NEW.resource;
	IF NOT FOUND OR lease.epoch <> NEW.epoch OR lease.holder IS NULL THEN
		RAISE EXCEPTION USING ERRCODE = 'LS002',
			MESSAGE = format('lease not live at the commit: epoch %s of %L is not the resource''s lease', NEW.epoch, NEW.resource);
	END IF;
	now_ms := greatest(lease.last_tick, ` + serverClock + `);
	IF lease.expires_at <= now_ms THEN
		RAISE EXCEPTION USING ERRCODE = 'LS001',
			MESSAGE = format('lease not live at the commit: epoch %s of %L expired at tick %s, %s ms before the commit',
				NEW.epoch, NEW.resource, lease.expires_at, now_ms - lease.expires_at);
	END IF;
	RETURN NULL;
END
$live$`
	// liveTriggerTemplate attaches the check to the tenures' fence table,
	// once: a constraint trigger has no CREATE OR REPLACE.
	liveTriggerTemplate = `DO $create$ BEGIN
	IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_trigger WHERE tgname = '{live}' AND tgrelid = '"{tenures}"'::regclass) THEN
		CREATE CONSTRAINT TRIGGER "{live}" AFTER INSERT OR UPDATE ON "{tenures}"
			DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION "{live}"();
	END IF;
END $create$`

	// probeFirstRowTemplate inserts a resource's first row, released,
	// only to wait for another transaction's first row of it: see
	// Store.awaitFirstRow, which rolls it back.
	probeFirstRowTemplate = `INSERT INTO "{authority}" (resource, epoch, holder, granted_at, expires_at, last_tick)
	VALUES ($1, 1, NULL, 0, 0, 0) ON CONFLICT (resource) DO NOTHING`

	readUnfencedTemplate  = `SELECT epoch, value FROM "{unfenced}" WHERE resource = $1`
	writeUnfencedTemplate = `INSERT INTO "{unfenced}" (resource, epoch, value) VALUES ($1, $2, $3)
	ON CONFLICT (resource) DO UPDATE SET epoch = excluded.epoch, value = excluded.value`
)

// statements are one store's SQL.
type statements struct {
	authoritySchema, unfencedSchema string
	liveFunction, liveTrigger       string
	// lock reads the lease row under each lock mode, with the clock;
	// peek reads it without a lock.
	lock          map[string]string
	peek          string
	updateLease   string
	insertLease   string
	probeFirstRow string
	readUnfenced  string
	writeUnfenced string
}

func newStatements(tables tableNames) statements {
	names := strings.NewReplacer("{authority}", tables.authority, "{unfenced}", tables.unfenced,
		"{tenures}", tables.tenures, "{live}", tables.live)
	read := func(lock string) string {
		return strings.Replace(names.Replace(readLeaseTemplate), "{lock}", lock, 1)
	}
	return statements{
		authoritySchema: names.Replace(authoritySchema),
		unfencedSchema:  names.Replace(unfencedSchema),
		liveFunction:    names.Replace(liveFunctionTemplate),
		liveTrigger:     names.Replace(liveTriggerTemplate),
		lock: map[string]string{
			lockGrant: read(lockGrant), lockRenew: read(lockRenew), lockGuard: read(lockGuard),
		},
		peek:          read(""),
		updateLease:   names.Replace(updateLeaseTemplate),
		insertLease:   names.Replace(insertLeaseTemplate),
		probeFirstRow: names.Replace(probeFirstRowTemplate),
		readUnfenced:  names.Replace(readUnfencedTemplate),
		writeUnfenced: names.Replace(writeUnfencedTemplate),
	}
}
