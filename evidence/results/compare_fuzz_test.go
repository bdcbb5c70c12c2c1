package results

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzParseJSON feeds parseJSON and firstDifference arbitrary --check files
// and holds them to encoding/json, which shares none of their code paths
// for comparing: parseJSON never panics; it accepts only what json.Valid
// accepts, and refuses what json.Valid accepts only for a duplicate key or
// bytes that are not UTF-8; a parsed document means the same as itself and
// as a second parse of it; and two documents differ exactly when
// encoding/json decodes them (numbers as written) to unequal values, in
// either order.
func FuzzParseJSON(f *testing.F) {
	for _, tc := range malformedJSON {
		if len(tc.input) < 1000 { // the deep ones are in the table test
			f.Add([]byte(tc.input), []byte(`{}`))
		}
	}
	for _, tc := range jsonPairs {
		f.Add([]byte(tc.want), []byte(tc.got))
	}
	// results.json's shape, small: with the whole file, 19 KB, as a seed
	// the fuzzer spent most of a 60 s run minimising one input.
	f.Add([]byte(resultsShaped), []byte(strings.Replace(resultsShaped, `"stale"`, `"accepted"`, 1)))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		va := parseAgreeingWithEncodingJSON(t, a)
		vb := parseAgreeingWithEncodingJSON(t, b)
		if va == nil || vb == nil {
			return
		}
		_, differs := firstDifference("$", va, vb)
		if _, back := firstDifference("$", vb, va); back != differs {
			t.Fatalf("%q against %q differs %v, the other way round %v", a, b, differs, back)
		}
		if want := !bytes.Equal(decodeReference(t, a), decodeReference(t, b)); differs != want {
			t.Fatalf("%q against %q: firstDifference says differs %v, encoding/json %v", a, b, differs, want)
		}
	})
}

// resultsShaped is a document laid out as results.json is, in a few lines.
const resultsShaped = `{
  "schema": "leases-experiment/3",
  "scenarios": [
    {
      "name": "fenced-receiver",
      "steps": [
        {
          "actor": "A",
          "operation": "write",
          "tick": 3,
          "epoch": 1,
          "value": "value-from-A",
          "outcome": "stale",
          "highest_epoch_granted": 2,
          "receiver_after": {
            "epoch": 2,
            "value_epoch": 2,
            "value": "value-from-B"
          }
        }
      ],
      "final_receiver_state": null,
      "verdicts": {
        "stale_write_accepted": false
      }
    }
  ],
  "exploration": {
    "bounds": {
      "workers": 3,
      "ttl": 2,
      "last_tick": 4
    },
    "protocols": []
  }
}
`

// parseAgreeingWithEncodingJSON parses data, checks the properties that
// hold for one document, and returns the value or nil if it was refused.
func parseAgreeingWithEncodingJSON(t *testing.T, data []byte) *Value {
	t.Helper()
	v, err := parseJSON(data)
	if err != nil {
		if json.Valid(data) && utf8.Valid(data) && !strings.Contains(err.Error(), "duplicate key") {
			t.Fatalf("parseJSON(%q) refused a valid document: %v", data, err)
		}
		return nil
	}
	if !json.Valid(data) {
		t.Fatalf("parseJSON(%q) accepted what json.Valid refuses", data)
	}
	if d, differs := firstDifference("$", v, v); differs {
		t.Fatalf("%q differs from itself %v", data, d)
	}
	again, err := parseJSON(bytes.Clone(data))
	if err != nil {
		t.Fatalf("parseJSON(%q) accepted it once, then refused it: %v", data, err)
	}
	if d, differs := firstDifference("$", v, again); differs {
		t.Fatalf("%q differs from a second parse of itself %v", data, d)
	}
	return v
}

// decodeReference is encoding/json's reading of a document parseJSON
// accepted, numbers kept as written, encoded again: objects with their keys
// sorted, strings escaped one way. Two documents mean the same when these
// bytes are equal. Comparing bytes rather than walking maps with
// reflect.DeepEqual, in random order, keeps an input's coverage the same
// from run to run, as the fuzzer expects.
func decodeReference(t *testing.T, data []byte) []byte {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("encoding/json refuses %q, which parseJSON accepted: %v", data, err)
	}
	canonical, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("encoding/json cannot encode again what it decoded from %q: %v", data, err)
	}
	return canonical
}
