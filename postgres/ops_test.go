package postgres_test

import (
	"testing"

	"leases/testkit/opstest"
)

func TestOpsOutcomesOnPostgreSQL(t *testing.T) { opstest.Outcomes(t, database(t, 0)) }

func TestOpsBadInputOnPostgreSQL(t *testing.T) { opstest.BadInput(t, database(t, 0)) }

func TestOpsRunningOnPostgreSQL(t *testing.T) { opstest.Running(t, database(t, 0)) }
