package leases

import (
	"context"
	"errors"
	"fmt"
)

// Snapshot returns an image of the whole database, and Restore puts one
// back. They exist for tools that run the real authority and receiver from
// one state many times over, as the schedule explorer does: restoring an
// image is the same as rolling back to a savepoint. Use them on a store
// opened on ":memory:", where no other process shares the file.
func (s *Store) Snapshot(ctx context.Context) ([]byte, error) {
	var image []byte
	err := s.rawConn(ctx, func(c serializer) (err error) {
		image, err = c.Serialize()
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	return image, nil
}

// Restore replaces the whole database with image, taken by Snapshot.
func (s *Store) Restore(ctx context.Context, image []byte) error {
	if err := s.rawConn(ctx, func(c serializer) error { return c.Deserialize(image) }); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	return nil
}

// serializer is the part of the driver's connection that copies images.
type serializer interface {
	Serialize() ([]byte, error)
	Deserialize([]byte) error
}

func (s *Store) rawConn(ctx context.Context, fn func(serializer) error) error {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	err = conn.Raw(func(driverConn any) error {
		c, ok := driverConn.(serializer)
		if !ok {
			return errors.New("the SQLite driver cannot serialize")
		}
		return fn(c)
	})
	return errors.Join(err, conn.Close())
}
