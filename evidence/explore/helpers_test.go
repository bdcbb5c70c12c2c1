package explore

import (
	"context"

	"leases/evidence/backend"
)

// sqlite is the SQLite backend, readied: it needs nothing started, and its
// explorable stores live in memory.
var sqlite, _ = backend.SQLite{}.Start(context.Background(), "")
