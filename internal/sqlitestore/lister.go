package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	"leases"
	"leases/internal/rules"
)

var _ leases.Lister = (*Lessor)(nil)

// Live implements [leases.Lister]: in one transaction, on the clock read
// once inside it, the rows of the named resources (or every row that may
// hold a live lease), each decided live by package rules at the later of
// that reading and the row's last change, as Holder decides.
func (l *Lessor) Live(ctx context.Context, resources ...string) ([]leases.Lease, int64, error) {
	for _, resource := range resources {
		if err := rules.CheckName("resource", resource); err != nil {
			return nil, 0, err
		}
	}
	var live []leases.Lease
	var now int64
	err := l.auth.store.inTransaction(ctx, func(tx *sql.Tx) error {
		live, now = nil, l.now()
		if err := rules.CheckTick(now); err != nil {
			return err
		}
		tick := rules.Clock(func() int64 { return now })
		keep := func(resource string, row rules.LeaseRow) error {
			at, err := tick(row, true, 0)
			if err != nil {
				return err
			}
			if lease, ok := rules.Holder(row, true, resource, at); ok {
				live = append(live, lease)
			}
			return nil
		}
		if len(resources) == 0 {
			return l.auth.held(ctx, tx, now, keep)
		}
		for _, resource := range resources {
			row, found, err := l.auth.read(ctx, tx, resource)
			if err != nil {
				return err
			}
			if found {
				if err := keep(resource, row); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("live leases at tick %d: %w", now, err)
	}
	slices.SortFunc(live, func(a, b leases.Lease) int { return strings.Compare(a.Resource, b.Resource) })
	live = slices.CompactFunc(live, func(a, b leases.Lease) bool { return a.Resource == b.Resource })
	return live, now, nil
}

// held calls keep with every row that holds a lease expiring after tick
// now, in the order of their resources.
func (a *Authority) held(ctx context.Context, tx *sql.Tx, now int64, keep func(string, rules.LeaseRow) error) error {
	rows, err := tx.StmtContext(ctx, a.store.sql.byText[sqlListHeld]).QueryContext(ctx, now)
	if err != nil {
		return fmt.Errorf("list leases: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var resource string
		var row rules.LeaseRow
		var holder sql.NullString
		if err := rows.Scan(&resource, &row.Epoch, &holder, &row.GrantedAt, &row.ExpiresAt, &row.LastTick); err != nil {
			return fmt.Errorf("list leases: %w", err)
		}
		row.Holder, row.Held = holder.String, holder.Valid
		if err := keep(resource, row); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("list leases: %w", err)
	}
	return nil
}
