package etcdcommand_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A run killed outright (SIGKILL, in the middle of the failover) leaves
// no process, but leaves its cluster's data; the next run in the same
// TMPDIR removes it (etcdcluster.Sweep), and leaves nothing of its own.
// What stays is the killed run's empty directory for the etcd backend
// (backend.StartInTemp's), which its cluster never used.
func TestKilledRunIsSwept(t *testing.T) {
	tmp := t.TempDir()
	killed := run{env: []string{interruptEnv + "=after-kill:SIGKILL"}, tmpDir: tmp}.start(t, "--output", filepath.Join(t.TempDir(), "out.json"))
	if killed.code != -1 {
		t.Fatalf("the killed run: exit %d; want killed by a signal; stderr:\n%s", killed.code, killed.stderr)
	}
	clusters, size := clusterData(t, tmp)
	if len(clusters) != 1 {
		t.Fatalf("the killed run left %v; want one cluster's directory", clusters)
	}
	t.Logf("the killed run left %s: %.1f MB", filepath.Base(clusters[0]), float64(size)/(1<<20))
	before := entries(t, tmp)
	next := run{tmpDir: tmp}.start(t, "--output", filepath.Join(t.TempDir(), "out.json"))
	if next.code != 0 {
		t.Fatalf("the next run: exit %d; stderr:\n%s", next.code, next.stderr)
	}
	if left, _ := clusterData(t, tmp); len(left) > 0 {
		t.Fatalf("after the next run: %v; want the killed run's cluster swept", left)
	}
	after := entries(t, tmp)
	for _, name := range after {
		if !strings.HasPrefix(name, "leases-etcd-") || !slices.Contains(before, name) {
			t.Errorf("after the next run, %s is in TMPDIR; want only the killed run's empty directory", name)
		}
	}
}

// clusterData lists the cluster directories under dir and their size.
func clusterData(t *testing.T, dir string) (clusters []string, size int64) {
	t.Helper()
	clusters, err := filepath.Glob(filepath.Join(dir, "leases-etcd-cluster-*[0-9]"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range clusters {
		_ = filepath.WalkDir(c, func(_ string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				if info, err := d.Info(); err == nil {
					size += info.Size()
				}
			}
			return nil
		})
	}
	return clusters, size
}

func entries(t *testing.T, dir string) []string {
	t.Helper()
	list, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return names(list)
}
