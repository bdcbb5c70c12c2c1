// Package results is the document the command writes: what every run
// found, in a fixed order and nothing that varies between runs, so that a
// rerun on any machine gives the same bytes; and the comparison that
// tells a reader where a rerun and a file differ.
//
// Part of the evidence (what cmd/run-experiment reruns), not of the
// library: no API promise.
package results

import (
	"bytes"
	"encoding/json"
	"reflect"

	"leases/evidence/explore"
	"leases/evidence/scenario"
)

// Schema names the layout of the results document; bump it when the
// meaning of a field changes.
const Schema = "leases-experiment/5"

// Results is the whole semantic result of one run: everything a reader
// needs to check the claims, and nothing that varies between runs (no
// process ids, paths, timings or dates). Struct fields, not maps, so the
// key order is fixed.
type Results struct {
	Schema string `json:"schema"`
	// Backends holds what each backend did, in the order the command ran
	// them.
	Backends []Backend `json:"backends"`
	// Agreement compares the backends, scenario by scenario.
	Agreement []Agreement `json:"agreement"`
}

// Backend is what one run found on one backend.
type Backend struct {
	Backend   string              `json:"backend"`
	Scenarios []scenario.Scenario `json:"scenarios"`
	// Exploration covers every schedule of a bounded model, beyond the
	// scenarios' hand-picked ones.
	Exploration *explore.Exploration `json:"exploration"`
}

// Agreement says whether a scenario that ran on several backends ran the
// same there: the same steps, outcomes, refusals, records and verdicts.
type Agreement struct {
	Scenario string   `json:"scenario"`
	Backends []string `json:"backends"`
	Same     bool     `json:"same_steps_and_verdicts"`
}

// Agree compares every scenario that ran on more than one backend with
// its run on the first backend, and returns one Agreement per scenario.
func Agree(backends []Backend) []Agreement {
	agreements := []Agreement{}
	if len(backends) == 0 {
		return agreements
	}
	for _, first := range backends[0].Scenarios {
		a := Agreement{Scenario: first.Name, Backends: []string{backends[0].Backend}, Same: true}
		for _, other := range backends[1:] {
			for _, sc := range other.Scenarios {
				if sc.Name == first.Name {
					a.Backends = append(a.Backends, other.Backend)
					a.Same = a.Same && reflect.DeepEqual(sc, first)
				}
			}
		}
		if len(a.Backends) > 1 {
			agreements = append(agreements, a)
		}
	}
	return agreements
}

// Encode renders results deterministically: fixed key order, two-space
// indent, no HTML escaping, a trailing newline.
func Encode(r *Results) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
