// Command testsummary reads the events of `go test -json` on its input,
// prints what `go test` would (each package's ok or FAIL line, and the
// output of every test that failed), and ends with one line that says
// how many tests were skipped and why, grouped by the reason each gave
// (the first line of its t.Skip message). .ci/run pipes its test runs
// through it, so that a run on a machine without strace or PostgreSQL
// says so at the end rather than passing silently.
//
//	go test -json ./... | go run ./tools/testsummary
//
// It exits 1 when a package or test failed, or when the input held no
// package result at all, and 0 otherwise.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json's TestEvent).
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64
}

func main() {
	os.Exit(run(os.Stdin, os.Stdout))
}

// run summarizes the events on in, writing to out, and returns the exit
// status.
func run(in io.Reader, out io.Writer) int {
	s := summary{output: map[string][]string{}, skipped: map[string]int{}}
	lines := bufio.NewScanner(in)
	lines.Buffer(make([]byte, 1<<20), 16<<20)
	for lines.Scan() {
		var e event
		if err := json.Unmarshal(lines.Bytes(), &e); err != nil {
			fmt.Fprintln(out, lines.Text()) // not an event: a build error, say
			continue
		}
		s.add(e, out)
	}
	if err := lines.Err(); err != nil {
		fmt.Fprintln(out, "testsummary:", err)
		return 1
	}
	fmt.Fprintln(out, s.skips())
	if s.failed || s.packages == 0 {
		return 1
	}
	return 0
}

// summary is what the events said so far.
type summary struct {
	output   map[string][]string // by package and test, while it runs
	skipped  map[string]int      // by reason
	packages int
	failed   bool
}

func (s *summary) add(e event, out io.Writer) {
	key := e.Package + " " + e.Test
	switch e.Action {
	case "output":
		s.output[key] = append(s.output[key], e.Output)
	case "skip":
		if e.Test != "" {
			s.skipped[reason(s.output[key])]++
		}
		delete(s.output, key)
	case "pass":
		if e.Test == "" {
			s.packages++
			fmt.Fprintf(out, "ok  \t%s\t%.3fs\n", e.Package, e.Elapsed)
		}
		delete(s.output, key)
	case "fail":
		s.failed = true
		if e.Test == "" {
			s.packages++
		}
		fmt.Fprint(out, strings.Join(s.output[key], ""))
		delete(s.output, key)
	}
}

// reason is the first line a skipped test said: its t.Skip message,
// without the file and line go test puts in front.
func reason(output []string) string {
	for _, line := range output {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "=== ") || strings.HasPrefix(line, "--- SKIP") {
			continue
		}
		if _, msg, ok := strings.Cut(line, ": "); ok && strings.Contains(line[:len(line)-len(msg)], ".go:") {
			return msg
		}
		return line
	}
	return "no reason given"
}

// skips is the closing line: how many tests were skipped, and why.
func (s *summary) skips() string {
	total := 0
	var reasons []string
	for why, n := range s.skipped {
		total += n
		reasons = append(reasons, fmt.Sprintf("%d: %s", n, why))
	}
	if total == 0 {
		return "skipped: none"
	}
	slices.Sort(reasons)
	return fmt.Sprintf("skipped: %d tests (%s)", total, strings.Join(reasons, "; "))
}
