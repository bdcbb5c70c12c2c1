package stress

// What the file holds once every worker has exited, read through a store
// of the test's own and, for the authority's rows, directly.

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"leases"
	"leases/sqlite"
	"leases/testkit/sqlitetest"
)

// fileState is what the file holds at the end.
type fileState struct {
	records   map[string]receiverRecord
	rows      map[string]authorityRow
	integrity string
}

// receiverRecord is the fenced receiver's record of one resource.
type receiverRecord struct {
	leases.Record
	found bool
}

// authorityRow is an authority_leases row; holder is empty once released.
type authorityRow struct {
	epoch                          int64
	holder                         string
	grantedAt, expiresAt, lastTick int64
}

// highestEpoch is the highest epoch the authority's rows reached.
func (s fileState) highestEpoch() int64 {
	highest := int64(0)
	for _, row := range s.rows {
		highest = max(highest, row.epoch)
	}
	return highest
}

// readFile reads the receiver's record of every resource, the integrity
// check and the authority's rows of the file at path.
func readFile(t *testing.T, ctx context.Context, path string, resources []string) fileState {
	t.Helper()
	store, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	final := fileState{records: map[string]receiverRecord{}}
	for _, resource := range resources {
		record, found, err := store.Receiver(leases.Fenced).Read(ctx, resource)
		if err != nil {
			t.Fatal(err)
		}
		final.records[resource] = receiverRecord{record, found}
	}
	if final.integrity, err = store.IntegrityCheck(ctx); err != nil {
		t.Fatal(err)
	}
	final.rows = readAuthorityRows(t, ctx, path)
	return final
}

// readAuthorityRows reads authority_leases, which no public method lists
// whole, by resource.
func readAuthorityRows(t *testing.T, ctx context.Context, path string) map[string]authorityRow {
	t.Helper()
	db := sqlitetest.OpenDirectly(t, path)
	defer db.Close()
	rows, err := db.QueryContext(ctx, `SELECT resource, epoch, holder, granted_at, expires_at, last_tick FROM authority_leases`)
	if err != nil {
		t.Fatal(err)
	}
	byResource := map[string]authorityRow{}
	for rows.Next() {
		var resource string
		var row authorityRow
		var holder sql.NullString
		if err := rows.Scan(&resource, &row.epoch, &holder, &row.grantedAt, &row.expiresAt, &row.lastTick); err != nil {
			t.Fatal(err)
		}
		row.holder = holder.String
		byResource[resource] = row
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		t.Fatal(err)
	}
	return byResource
}
