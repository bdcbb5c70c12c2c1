package leases_test

// The contract's clauses beyond the seed, on SQLite; the etcd module runs
// them on etcd. Not among the contract's 17 tests.

import (
	"testing"

	"leases/internal/contract"
)

func TestObserveOutcomes(t *testing.T) {
	contract.ObserveOutcomes(t, sqliteBackend(t))
}

func TestGuardedReceiverOutcomes(t *testing.T) {
	contract.GuardedReceiverOutcomes(t, sqliteBackend(t))
}

func TestHolderAnswersWhoHolds(t *testing.T) {
	contract.HolderAnswersWhoHolds(t, sqliteBackend(t))
}
