package etcd

import (
	"encoding/json"
	"fmt"

	"leases"
	"leases/internal/rules"
)

// decodeRow returns the lease row v holds; found is false when the key is
// absent, never when its value does not decode.
func decodeRow(v view) (rules.LeaseRow, bool, error) { return decode[rules.LeaseRow](v) }

// decodeRecord returns the receiver record v holds, as decodeRow does.
func decodeRecord(v view) (leases.Record, bool, error) { return decode[leases.Record](v) }

func decode[T any](v view) (value T, found bool, err error) {
	if !v.found() {
		return value, false, nil
	}
	if err := json.Unmarshal(v.value, &value); err != nil {
		var zero T
		return zero, false, fmt.Errorf("decode %s: %w", v.key, err)
	}
	return value, true, nil
}

// encode is the write that stores value, as JSON, at key.
func encode(key string, value any) ([]write, error) {
	data, err := json.Marshal(value)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", key, err)
	}
	return []write{{key: key, value: data}}, nil
}

// acceptedWrite is what a receiver's decision writes: its record when the
// write or observe was accepted, nothing otherwise.
func acceptedWrite(key string, result leases.WriteResult) ([]write, error) {
	if result.Outcome != leases.Accepted {
		return nil, nil
	}
	return encode(key, result.Record)
}
