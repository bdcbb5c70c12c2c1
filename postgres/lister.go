package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"leases"
	"leases/internal/outcome"
	"leases/internal/rules"
)

// listTemplate reads the server's clock once, in a row of its own, and
// beside it every row that may hold a lease live at that tick: one row
// of NULLs when there is none. $1 is the resources to look at, or NULL
// for all. Live sorts the rows itself, in byte order, whatever the
// database's collation.
const listTemplate = `SELECT clock.now, lease.resource, lease.epoch, lease.holder, lease.granted_at, lease.expires_at, lease.last_tick
	FROM (SELECT coalesce($2::bigint, ` + serverClock + `) AS now) AS clock
	LEFT JOIN "{authority}" AS lease
		ON lease.holder IS NOT NULL AND lease.expires_at > clock.now
		AND ($1::text[] IS NULL OR lease.resource = ANY ($1::text[]))`

// Live implements [leases.Lessor.Live] with one statement that takes no lock,
// as Holder does: the server's clock, read once, and the rows of the
// named resources (or all) that hold a lease expiring after it, each
// decided live by package rules at the later of that tick and the row's
// last change. Its ticks are the server's (leases.ServerMillis).
func (l *lessor) Live(ctx context.Context, resources ...string) ([]leases.Lease, int64, error) {
	live, now, err := l.store.live(ctx, nil, resources)
	for i := range live {
		live[i].Ticks = leases.ServerMillis
	}
	return live, now, err
}

// Live implements [leases.Authority.Live], at tick now as the caller says
// it, with the same one statement.
func (a *Authority) Live(ctx context.Context, now int64, resources ...string) ([]leases.Lease, error) {
	if err := rules.CheckTick(now); err != nil {
		return nil, err
	}
	live, _, err := a.store.live(ctx, &now, resources)
	return live, err
}

// live lists the leases live on resources (or all), at tick at, or on the
// server's clock when at is nil.
func (s *Store) live(ctx context.Context, at *int64, resources []string) ([]leases.Lease, int64, error) {
	for _, resource := range resources {
		if err := rules.CheckName("resource", resource); err != nil {
			return nil, 0, err
		}
	}
	var names any // NULL: every resource
	if len(resources) > 0 {
		names = slices.Compact(slices.Sorted(slices.Values(resources)))
	}
	query := strings.ReplaceAll(listTemplate, "{authority}", s.names.authority)
	rows, err := s.db.QueryContext(ctx, query, names, at)
	if err != nil {
		return nil, 0, fmt.Errorf("live leases: %w", outcome.BeforeCommit(ctx, err))
	}
	defer rows.Close()
	var live []leases.Lease
	var now int64
	for rows.Next() {
		var resource, holder sql.NullString
		var epoch, grantedAt, expiresAt, lastTick sql.NullInt64
		if err := rows.Scan(&now, &resource, &epoch, &holder, &grantedAt, &expiresAt, &lastTick); err != nil {
			return nil, 0, fmt.Errorf("live leases: %w", outcome.BeforeCommit(ctx, err))
		}
		if !resource.Valid {
			continue // no row: the clock alone
		}
		row := rules.LeaseRow{Epoch: epoch.Int64, Holder: holder.String, Held: holder.Valid,
			GrantedAt: grantedAt.Int64, ExpiresAt: expiresAt.Int64, LastTick: lastTick.Int64}
		tick := now
		if at == nil {
			tick = rules.NotBefore(row, true, now)
		}
		if lease, ok := rules.Holder(row, true, resource.String, tick); ok {
			live = append(live, lease)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("live leases: %w", outcome.BeforeCommit(ctx, err))
	}
	if now == 0 {
		return nil, 0, fmt.Errorf("live leases: %w", outcome.BeforeCommit(ctx, errors.New("the server's clock was not read")))
	}
	slices.SortFunc(live, func(a, b leases.Lease) int { return strings.Compare(a.Resource, b.Resource) })
	return live, now, nil
}
