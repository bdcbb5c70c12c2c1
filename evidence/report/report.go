// Package report turns a run's document into what the README and docs/
// show of it: a Mermaid sequence diagram for every scenario on every
// backend and for each explored counterexample, and the tables of
// verdicts, agreement and explored figures. Each is a named block of a
// document (Documents draws them, and the code blocks from the sources);
// the command draws them after a run (--docs), and a test holds every
// block of the documents to what this package makes of results.json, so
// that a picture or a figure cannot drift from the run.
//
// Part of the evidence (what cmd/run-experiment reruns), not of the
// library: no API promise.
package report

import (
	"fmt"

	"leases/evidence/diagram"
	"leases/evidence/results"
)

// Blocks are every generated block of doc, by name.
func Blocks(doc *results.Results) (map[string]string, error) {
	blocks := map[string]string{}
	for i, b := range doc.Backends {
		for _, sc := range b.Scenarios {
			blocks[DiagramName(b.Backend, sc.Name)] = diagram.Sequence(scenarioDiagram(b.Backend, sc))
		}
		blocks["table exploration "+b.Backend] = explorationTable(b)
		if i > 0 {
			continue // the counterexamples' pictures: the first backend's
		}
		for _, p := range b.Exploration.Protocols {
			for _, ce := range p.Counterexamples {
				participants, lines, err := counterexampleDiagram(ce.Schedule)
				if err != nil {
					return nil, fmt.Errorf("%s, %s: %w", p.Protocol, ce.Property, err)
				}
				blocks[CounterexampleName(string(p.Protocol), ce.Property)] = diagram.Sequence(participants, lines)
			}
		}
	}
	blocks["table scenarios"] = scenarioTable(doc)
	blocks["table agreement"] = agreementTable(doc)
	blocks["table tool operations"] = toolTable(doc)
	return blocks, nil
}

// DiagramName names the diagram of a scenario on a backend.
func DiagramName(backend, scenario string) string { return "diagram " + backend + "/" + scenario }

// CounterexampleName names the diagram of an explored counterexample.
func CounterexampleName(protocol, property string) string {
	return "diagram explored " + protocol + "/" + property
}
