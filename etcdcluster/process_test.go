package etcdcluster

import "testing"

// The line a failed member is reported by is the most telling one it
// wrote, whatever comes after it.
func TestLastWords(t *testing.T) {
	cases := []struct {
		name, stderr, want string
	}{
		{"a Go panic, with where",
			"panic: runtime error: invalid memory address or nil pointer dereference\n" +
				"[signal SIGSEGV: segmentation violation code=0x1 addr=0x60 pc=0xefe8bd]\n\n" +
				"goroutine 1 [running]:\n" +
				"go.etcd.io/etcd/server/v3/storage/wal.(*WAL).SetUnsafeNoFsync(...)\n" +
				"\t/root/go/pkg/mod/go.etcd.io/etcd/server/v3@v3.7.3/storage/wal/wal.go:272\n",
			`"panic: runtime error: invalid memory address or nil pointer dereference in go.etcd.io/etcd/server/v3/storage/wal.(*WAL).SetUnsafeNoFsync"`},
		{"a fatal log line beats an error before it",
			"error\tfailed to update storage version\n" +
				"fatal\tfailed to create snapshot directory\t{\"error\": \"no space left on device\"}\n" +
				"error\tsomething after\n",
			`"fatal failed to create snapshot directory {\"error\": \"no space left on device\"}"`},
		{"a panic log line, then Go's panic",
			"panic\tfailed to create WAL\t{\"error\": \"input/output error\"}\n" +
				"panic: failed to create WAL\n\ngoroutine 1 [running]:\nmain.main()\n",
			`"panic: failed to create WAL in main.main"`},
		{"nothing telling: the last line",
			"starting\nstill starting\n",
			`"still starting"`},
		{"a line without end",
			"half a line",
			`"half a line"`},
		{"nothing", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var w lastWords
			for i := range len(tc.stderr) { // a byte at a time: lines come in pieces
				_, _ = w.Write([]byte{tc.stderr[i]})
			}
			if got := w.String(); got != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}
