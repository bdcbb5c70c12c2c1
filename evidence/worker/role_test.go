package worker

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// The worker role's arguments choose what it plays: none, a bare worker
// that announces its pid and exits at the end of its input; one, a usage
// error (exit 2, one line); two, a worker on that backend and address
// (TestWorkerSaysWhyItExits runs one).
func TestRoleArguments(t *testing.T) {
	var out, stderr strings.Builder
	if code := play(nil, nil, strings.NewReader("ignored\n"), &out, &stderr); code != 0 ||
		out.String() != fmt.Sprintf("{\"pid\":%d}\n", os.Getpid()) || stderr.Len() != 0 {
		t.Fatalf("bare worker: exit %d, stdout %q, stderr %q; want exit 0 and its pid", code, out.String(), stderr.String())
	}
	out.Reset()
	if code := play(nil, []string{"sqlite"}, strings.NewReader(""), &out, &stderr); code != 2 || out.Len() != 0 ||
		strings.Count(stderr.String(), "\n") != 1 || !strings.Contains(stderr.String(), "want a backend and an address") {
		t.Fatalf("one argument: exit %d, stdout %q, stderr %q; want exit 2 and one line", code, out.String(), stderr.String())
	}
}
