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

// Live implements [leases.Lessor.Live]: in one transaction, on the clock
// read once inside it, the rows of the named resources (or every row that
// may hold a live lease), each decided live by package rules at the later
// of that reading and the row's last change, as Lease decides.
func (l *Lessor) Live(ctx context.Context, resources ...string) ([]leases.Lease, int64, error) {
	live, now, err := l.auth.live(ctx, resources, l.now, rules.Clock)
	for i := range live {
		live[i].Ticks = leases.HostMillis
	}
	return live, now, err
}

// Live implements [leases.Authority.Live], at tick now as the caller says
// it.
func (a *Authority) Live(ctx context.Context, now int64, resources ...string) ([]leases.Lease, error) {
	live, _, err := a.live(ctx, resources, func() int64 { return now }, func(func() int64) rules.TickFunc { return rules.At(now) })
	return live, err
}

// live lists, in one transaction, the leases live on resources (or all)
// at the tick that tick makes of the clock now, read once inside it.
func (a *Authority) live(ctx context.Context, resources []string, now func() int64, tick func(func() int64) rules.TickFunc) ([]leases.Lease, int64, error) {
	for _, resource := range resources {
		if err := rules.CheckName("resource", resource); err != nil {
			return nil, 0, err
		}
	}
	var live []leases.Lease
	var at int64
	err := a.store.inTransaction(ctx, func(tx *sql.Tx) error {
		live, at = nil, now()
		if err := rules.CheckTick(at); err != nil {
			return err
		}
		decide := tick(func() int64 { return at })
		keep := func(resource string, row rules.LeaseRow) error {
			t, err := decide(row, true, 0)
			if err != nil {
				return err
			}
			if lease, ok := rules.Holder(row, true, resource, t); ok {
				live = append(live, lease)
			}
			return nil
		}
		if len(resources) == 0 {
			return a.held(ctx, tx, at, keep)
		}
		for _, resource := range resources {
			row, found, err := a.read(ctx, tx, resource)
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
		return nil, 0, fmt.Errorf("live leases at tick %d: %w", at, err)
	}
	slices.SortFunc(live, func(a, b leases.Lease) int { return strings.Compare(a.Resource, b.Resource) })
	live = slices.CompactFunc(live, func(a, b leases.Lease) bool { return a.Resource == b.Resource })
	return live, at, nil
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
