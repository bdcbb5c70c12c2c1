package stress

// What the file holds once every worker has exited, read through a store
// of the test's own and, for the authority's rows, directly, into the
// history's final state.

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"leases"
	"leases/sqlite"
	"leases/testkit/sqlitetest"
	"leases/tests/history"
)

// readFile reads, of the file at path, the receiver's record of every
// resource, the integrity check and the authority's rows into h.
func readFile(t *testing.T, ctx context.Context, path string, resources []string, h *history.History) {
	t.Helper()
	store, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	h.Records = map[string]leases.Record{}
	for _, resource := range resources {
		record, found, err := store.Receiver(leases.Fenced).Read(ctx, resource)
		if err != nil {
			t.Fatal(err)
		}
		if found {
			h.Records[resource] = record
		}
	}
	if h.Integrity, err = store.IntegrityCheck(ctx); err != nil {
		t.Fatal(err)
	}
	h.Leases, h.Epochs = readAuthorityRows(t, ctx, path)
}

// readAuthorityRows reads authority_leases, which no public method lists
// whole: the rows, and their epochs, by resource.
func readAuthorityRows(t *testing.T, ctx context.Context, path string) (map[string]history.LeaseRow, map[string]int64) {
	t.Helper()
	db := sqlitetest.OpenDirectly(t, path)
	defer db.Close()
	rows, err := db.QueryContext(ctx, `SELECT resource, epoch, holder, granted_at, expires_at, last_tick FROM authority_leases`)
	if err != nil {
		t.Fatal(err)
	}
	byResource, epochs := map[string]history.LeaseRow{}, map[string]int64{}
	for rows.Next() {
		var resource string
		var row history.LeaseRow
		var holder sql.NullString
		if err := rows.Scan(&resource, &row.Epoch, &holder, &row.GrantedAt, &row.ExpiresAt, &row.LastTick); err != nil {
			t.Fatal(err)
		}
		row.Holder = holder.String
		byResource[resource], epochs[resource] = row, row.Epoch
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		t.Fatal(err)
	}
	return byResource, epochs
}
