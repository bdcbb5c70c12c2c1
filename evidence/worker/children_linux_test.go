package worker_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// children are this process's child processes that have not been reaped,
// as Linux lists them.
func children(t *testing.T) []string {
	t.Helper()
	lists, err := filepath.Glob("/proc/self/task/*/children")
	if err != nil {
		t.Fatal(err)
	}
	var pids []string
	for _, list := range lists {
		b, err := os.ReadFile(list)
		if err != nil {
			t.Skipf("cannot list child processes: %v", err)
		}
		pids = append(pids, strings.Fields(string(b))...)
	}
	return pids
}
