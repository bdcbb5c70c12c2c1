package etcdstore_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"leases/testkit/contract"
)

// The one rule for names holds at the Lessor, its listing and its watch:
// each bad name is refused with ErrInvalidInput, no key under the store's
// prefix changes, and no etcd lease is granted. (The authority's and the
// receivers' entry points: TestContract.)
func TestBadNamesAreRefusedAndChangeNothing(t *testing.T) {
	c := client(t)
	contract.LessorRefusesBadNames(t, newStore(t).Lessor(), keysAndNewLeases(c, prefix(t)))
}

// keysAndNewLeases renders every key under prefix, and every etcd lease
// granted since its first call: a grant leaves no key when the
// transaction that would attach it is never sent.
func keysAndNewLeases(c *clientv3.Client, prefix string) func(t *testing.T) string {
	var before []clientv3.LeaseID
	first := true
	return func(t *testing.T) string {
		t.Helper()
		resp, err := c.Leases(testContext(t))
		if err != nil {
			t.Fatal(err)
		}
		var ids, granted []clientv3.LeaseID
		for _, l := range resp.Leases {
			ids = append(ids, l.ID)
		}
		if first {
			before, first = ids, false
		}
		for _, id := range ids {
			if !slices.Contains(before, id) {
				granted = append(granted, id)
			}
		}
		var out strings.Builder
		out.WriteString(dumpPrefix(t, c, prefix))
		for _, id := range granted {
			fmt.Fprintf(&out, "etcd lease %x granted\n", id)
		}
		return out.String()
	}
}
