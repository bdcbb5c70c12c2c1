package etcd

import (
	"context"
	"fmt"

	"leases"
	"leases/internal/outcome"
	"leases/internal/rules"
)

// receiver is a fenced or unfenced receiver on a store's fenced/ or
// unfenced/ keys. It never reads the authority's keys.
type receiver struct {
	store *Store
	mode  leases.Mode
}

var _ leases.Receiver = (*receiver)(nil)

// Mode implements [leases.Receiver.Mode].
func (r *receiver) Mode() leases.Mode { return r.mode }

// Write implements [leases.Receiver.Write].
func (r *receiver) Write(ctx context.Context, resource string, epoch int64, value string) (leases.WriteResult, error) {
	if err := rules.CheckWrite(r.mode, resource, epoch, value); err != nil {
		return leases.WriteResult{}, err
	}
	result, err := r.write(ctx, resource, epoch, value)
	if err != nil {
		return leases.WriteResult{}, fmt.Errorf("write %q at epoch %d: %w", resource, epoch, err)
	}
	return result, nil
}

func (r *receiver) write(ctx context.Context, resource string, epoch int64, value string) (leases.WriteResult, error) {
	key := r.key(resource)
	if r.mode == leases.Unfenced {
		// Whatever comes is stored: the answer does not depend on what
		// is there, so there is nothing to read or compare.
		result := rules.Write(leases.Unfenced, leases.Record{}, false, epoch, value)
		writes, err := encode(key, result.Record)
		if err != nil {
			return leases.WriteResult{}, err
		}
		return result, r.store.put(ctx, key, writes[0].value)
	}
	var result leases.WriteResult
	err := r.store.decide(ctx, []string{key}, func(views []view) ([]write, error) {
		stored, found, err := decodeRecord(views[0])
		if err != nil {
			return nil, err
		}
		result = rules.Write(leases.Fenced, stored, found, epoch, value)
		return acceptedWrite(key, result)
	})
	return result, err
}

// Fence implements [leases.Receiver.Fence].
func (r *receiver) Fence(ctx context.Context, resource string, epoch int64) (leases.WriteResult, error) {
	if err := rules.CheckObserve(r.mode, resource, epoch); err != nil {
		return leases.WriteResult{}, err
	}
	var result leases.WriteResult
	key := r.key(resource)
	err := r.store.decide(ctx, []string{key}, func(views []view) ([]write, error) {
		stored, found, err := decodeRecord(views[0])
		if err != nil {
			return nil, err
		}
		result = rules.Observe(stored, found, epoch)
		return acceptedWrite(key, result)
	})
	if err != nil {
		return leases.WriteResult{}, fmt.Errorf("observe %q at epoch %d: %w", resource, epoch, err)
	}
	return result, nil
}

// Read implements [leases.Receiver.Read].
func (r *receiver) Read(ctx context.Context, resource string) (record leases.Record, found bool, err error) {
	if err := rules.First(rules.CheckMode(r.mode), rules.CheckName("resource", resource)); err != nil {
		return leases.Record{}, false, err
	}
	return r.store.readRecord(ctx, r.key(resource), resource)
}

// key is the resource's key among the receiver's own.
func (r *receiver) key(resource string) string {
	if r.mode == leases.Unfenced {
		return r.store.key(unfencedKind, resource)
	}
	return r.store.key(fencedKind, resource)
}

// readRecord returns the record at key, read linearizably.
func (s *Store) readRecord(ctx context.Context, key, resource string) (leases.Record, bool, error) {
	views, err := s.read(ctx, key)
	if err == nil {
		var record leases.Record
		var found bool
		if record, found, err = decodeRecord(views[0]); err == nil {
			return record, found, nil
		}
	}
	return leases.Record{}, false, fmt.Errorf("read %q: %w", resource, outcome.BeforeCommit(ctx, err))
}
