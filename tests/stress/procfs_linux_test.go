package stress

// What only Linux's /proc shows: the state of each thread of a process, and
// who holds a POSIX lock. TestPauseAndKill needs both (see skipWithoutProcfs);
// TestLoadKeepsEveryInvariant neither.

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// skipWithoutProcfs skips t where /proc cannot say what TestPauseAndKill
// asks of it; Linux has it.
func skipWithoutProcfs(*testing.T) {}

// threadStates returns the state letter of every thread of process pid
// (T for stopped) from /proc/pid/task/*/stat.
func threadStates(t *testing.T, pid int) string {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/task", pid)
	threads, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var states strings.Builder
	for _, thread := range threads {
		stat, err := os.ReadFile(dir + "/" + thread.Name() + "/stat")
		if err != nil {
			t.Fatal(err)
		}
		// "tid (comm) S ...": the command may hold spaces and parentheses.
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		states.WriteString(fields[0])
	}
	return states.String()
}

// writeLockHolder returns the pid of the process that holds SQLite's WAL
// write lock on the database at path, or 0: a POSIX write lock on byte
// 120 of the -shm file (WAL_WRITE_LOCK at UNIX_SHM_BASE in SQLite's
// os_unix.c), as /proc/locks lists it, for example
// "1: POSIX  ADVISORY  WRITE 20137 fe:00:9984125 120 120".
func writeLockHolder(t *testing.T, path string) int {
	t.Helper()
	info, err := os.Stat(path + "-shm")
	if err != nil {
		t.Fatal(err)
	}
	inode := ":" + strconv.FormatUint(info.Sys().(*syscall.Stat_t).Ino, 10)
	locks, err := os.ReadFile("/proc/locks")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(locks)) {
		f := strings.Fields(line)
		if len(f) == 8 && f[1] == "POSIX" && f[3] == "WRITE" && strings.HasSuffix(f[5], inode) && f[6] == "120" && f[7] == "120" {
			pid, err := strconv.Atoi(f[4])
			if err != nil {
				t.Fatalf("/proc/locks: %q", line)
			}
			return pid
		}
	}
	return 0
}
