package leases_test

import (
	"errors"

	sqlitedriver "modernc.org/sqlite"

	"leases"
)

// isBusy reports whether err is SQLite's "database is locked".
func isBusy(err error) bool {
	var sqliteErr *sqlitedriver.Error
	return errors.As(err, &sqliteErr) && sqliteErr.Code()&0xff == 5 // SQLITE_BUSY
}

// written is the record a write of value at epoch leaves behind.
func written(epoch int64, value string) leases.Record {
	return leases.Record{Epoch: epoch, ValueEpoch: epoch, Value: value}
}
