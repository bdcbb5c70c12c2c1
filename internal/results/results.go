// Package results is the document the command writes: what every run
// found, in a fixed order and nothing that varies between runs, so that a
// rerun on any machine gives the same bytes; and the comparison that
// tells a reader where a rerun and a file differ.
package results

import (
	"bytes"
	"encoding/json"

	"leases/internal/explore"
	"leases/internal/scenario"
)

// Schema names the layout of the results document; bump it when the
// meaning of a field changes.
const Schema = "leases-experiment/3"

// Results is the whole semantic result of one run: everything a reader
// needs to check the claims, and nothing that varies between runs (no
// process ids, paths, timings or dates). Struct fields, not maps, so the
// key order is fixed.
type Results struct {
	Schema    string              `json:"schema"`
	Scenarios []scenario.Scenario `json:"scenarios"`
	// Exploration covers every schedule of a bounded model, beyond the
	// scenarios' hand-picked ones.
	Exploration *explore.Exploration `json:"exploration"`
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
