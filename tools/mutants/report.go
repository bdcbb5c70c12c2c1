package main

import (
	"fmt"
	"os"
	"strings"
)

// writeReport writes the report to path and returns its summary line.
func writeReport(path string, generated int, chosen []*mutant, sources map[string]*sourceFile, how string, targets []string, stages []stage) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "# mutants of %s: %s\n", strings.Join(targets, " "), how)
	for _, s := range stages {
		fmt.Fprintf(&b, "# %s: %s\n", s.kills, strings.Join(s.args, " "))
	}
	count := map[string]int{}
	perFile := map[string]map[string]int{}
	var fileOrder []string
	timeouts := 0
	for _, m := range chosen {
		before, after := m.lines(sources[m.File])
		fmt.Fprintf(&b, "\n%d %s:%d:%d %s %s", m.ID, m.File, m.Line, m.Col, m.Op, m.Status)
		if m.Detail != "" {
			fmt.Fprintf(&b, " (%s)", m.Detail)
		}
		fmt.Fprintf(&b, "\n\t- %s\n\t+ %s\n", before, after)
		count[m.Status]++
		if m.Detail == "timeout" {
			timeouts++
		}
		if perFile[m.File] == nil {
			perFile[m.File] = map[string]int{}
			fileOrder = append(fileOrder, m.File)
		}
		perFile[m.File][m.Status]++
	}
	fmt.Fprintf(&b, "\n%-45s %8s %8s %8s %8s\n", "file", "compiled", "contract", "suite", "survived")
	for _, name := range fileOrder {
		c := perFile[name]
		fmt.Fprintf(&b, "%-45s %8d %8d %8d %8d\n", name,
			c[killedByContract]+c[killedBySuite]+c[survived], c[killedByContract], c[killedBySuite], c[survived])
	}
	compiled := count[killedByContract] + count[killedBySuite] + count[survived]
	summary := fmt.Sprintf("generated %d, tested %d: %d did not compile, %d compiled; killed by the contract %d (%.1f%%), "+
		"by the rest of the suite %d, survived %d; %d kills were timeouts",
		generated, len(chosen), count[notCompiled], compiled, count[killedByContract], percent(count[killedByContract], compiled),
		count[killedBySuite], count[survived], timeouts)
	if count[notRun] > 0 {
		summary += fmt.Sprintf("; %d not run (interrupted)", count[notRun])
	}
	fmt.Fprintf(&b, "\n%s\n", summary)
	return summary, os.WriteFile(path, []byte(b.String()), 0o644)
}

func percent(n, of int) float64 {
	if of == 0 {
		return 0
	}
	return 100 * float64(n) / float64(of)
}
