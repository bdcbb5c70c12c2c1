package results

import (
	"encoding/json"
	"strings"
	"testing"
)

// malformedJSON are --check files parseJSON must refuse with an error. They
// also seed FuzzParseJSON.
var malformedJSON = []struct {
	name, input, wantErr string
}{
	{"empty", "", "unexpected end"},
	{"only white space", " \n\t", "unexpected end"},
	{"a key that is a number", `{1:2}`, "invalid character '1'"},
	{"a key that is null", `{null:1}`, "invalid character 'n'"},
	{"a key that is an array", `{[1]:2}`, "invalid character '['"},
	{"a key without its value", `{"a"}`, "after object key"},
	{"a key and no colon", `{"a" 1}`, "after object key"},
	{"a colon and no value", `{"a":}`, "looking for beginning of value"},
	{"a trailing comma in an object", `{"a":1,}`, "looking for beginning of object key"},
	{"a trailing comma in an array", `[1,]`, "looking for beginning of value"},
	{"a leading comma", `[,1]`, "looking for beginning of value"},
	{"members without a comma", `{"a":1 "b":2}`, "after object key:value pair"},
	{"a duplicate key", `{"a":1,"a":1}`, `duplicate key "a"`},
	{"a duplicate key deeper down", `{"x":[{"b":1,"c":2,"b":3}]}`, `duplicate key "b"`},
	{"an unclosed array", `[1`, "unexpected end"},
	{"an unclosed object", `{"a":{`, "unexpected end"},
	{"an unclosed string", `"abc`, "unexpected"},
	{"a bracket that does not match", `[1}`, "invalid character '}'"},
	{"a closing bracket alone", `]`, "invalid character ']'"},
	{"two documents", `{} {}`, "data after the JSON document"},
	{"a document then text", "[]x", "data after the JSON document"},
	{"a number then a number", `1 2`, "data after the JSON document"},
	{"nesting one level too deep", strings.Repeat("[", maxJSONDepth+1) + strings.Repeat("]", maxJSONDepth+1), "nested deeper than 10000"},
	{"objects nested one level too deep", strings.Repeat(`{"a":`, maxJSONDepth+1) + "1" + strings.Repeat("}", maxJSONDepth+1), "nested deeper than 10000"},
	{"a byte that is not UTF-8", "\"\xff\"", "not UTF-8"},
	{"a byte order mark", "\ufeff{}", "invalid character"},
	{"a raw control character in a string", "\"a\x01\"", "invalid character"},
	{"a bad escape", `"\u12"`, "invalid character"},
	{"a leading zero", `01`, "data after the JSON document"},
	{"a leading dot", `.5`, "invalid character '.'"},
	{"NaN", `NaN`, "invalid character 'N'"},
	{"single quotes", `'a'`, "invalid character '\\''"},
	{"half a literal", `tru`, "unexpected"},
}

// What parseJSON refuses, it refuses with an error and no value; never a
// panic, and never a stack overflow however deep the nesting.
func TestParseJSONRefusesMalformedFiles(t *testing.T) {
	for _, tc := range malformedJSON {
		t.Run(tc.name, func(t *testing.T) {
			v, err := parseJSON([]byte(tc.input))
			if err == nil || v != nil {
				t.Fatalf("parseJSON(%.40q) = %v, %v; want an error", tc.input, v, err)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("parseJSON(%.40q): %v; want an error containing %q", tc.input, err, tc.wantErr)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("parseJSON(%.40q): error %q is more than one line", tc.input, err)
			}
		})
	}
}

// The depth limit is encoding/json's: the deepest document json.Valid takes
// parses, one level more is refused by both, for arrays and objects alike.
func TestParseJSONDepthLimitIsEncodingJSONs(t *testing.T) {
	for _, tc := range []struct {
		name        string
		open, close string
	}{
		{"arrays", "[", "]"},
		{"objects", `{"a":`, "}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nested := func(depth int) []byte {
				inner := ""
				if tc.name == "objects" {
					inner = "1"
				}
				return []byte(strings.Repeat(tc.open, depth) + inner + strings.Repeat(tc.close, depth))
			}
			if _, err := parseJSON(nested(maxJSONDepth)); err != nil || !json.Valid(nested(maxJSONDepth)) {
				t.Errorf("depth %d: parseJSON %v, json.Valid %v; want both to accept it", maxJSONDepth, err, json.Valid(nested(maxJSONDepth)))
			}
			if _, err := parseJSON(nested(maxJSONDepth + 1)); err == nil || json.Valid(nested(maxJSONDepth+1)) {
				t.Errorf("depth %d: parseJSON %v, json.Valid %v; want both to refuse it", maxJSONDepth+1, err, json.Valid(nested(maxJSONDepth+1)))
			}
		})
	}
}

// jsonPairs are documents compared by firstDifference: line is the
// difference it reports comparing want with got, empty when they mean the
// same. They also seed FuzzParseJSON.
var jsonPairs = []struct {
	name, want, got, line string
}{
	// Kinds differ, empty or not.
	{"an empty object and an empty array", `{}`, `[]`, "at $: expected an object with 0 keys, got an array of 0 elements"},
	{"an empty array and null", `[]`, `null`, "at $: expected an array of 0 elements, got null"},
	{"an empty object and null", `{}`, `null`, "at $: expected an object with 0 keys, got null"},
	{"an empty string and null", `""`, `null`, `at $: expected "", got null`},
	{"the string null and null", `"null"`, `null`, `at $: expected "null", got null`},
	{"a number and its string", `0`, `"0"`, `at $: expected 0, got "0"`},
	{"a boolean and its string", `true`, `"true"`, `at $: expected true, got "true"`},
	{"false and 0", `false`, `0`, "at $: expected false, got 0"},
	{"an object and an array, not empty", `{"a":1}`, `[1]`, "at $: expected an object with 1 keys, got an array of 1 elements"},
	{"an empty array and an array holding one", `[]`, `[[]]`, "at $: expected 0 elements, got 1 elements"},
	{"kinds deeper down", `{"a":[null]}`, `{"a":[[]]}`, "at $.a[0]: expected null, got an array of 0 elements"},
	{"an empty object and an empty array as a field", `{"a":{}}`, `{"a":[]}`, "at $.a: expected an object with 0 keys, got an array of 0 elements"},
	// Numbers are compared as written: results.json holds only integers,
	// so another spelling of a number is a difference, not a format.
	{"1 and 1.0", `1`, `1.0`, "at $: expected 1, got 1.0"},
	{"1 and 1e0", `1`, `1e0`, "at $: expected 1, got 1e0"},
	{"0 and -0", `0`, `-0`, "at $: expected 0, got -0"},
	// Values of one kind.
	{"two strings", `"a"`, `"b"`, `at $: expected "a", got "b"`},
	{"a key missing", `{"a":1,"b":2}`, `{"a":1}`, "at $.b: expected 2, got no such key"},
	{"a key added", `{"a":1}`, `{"a":1,"c":[]}`, "at $.c: expected no such key, got an array of 0 elements"},
	{"an element missing", `[1,2]`, `[1]`, "at $: expected 2 elements, got 1 elements"},
	{"the first of several differences", `{"s":[{"x":1},{"x":2}],"t":3}`, `{"s":[{"x":1},{"x":5}],"t":4}`, "at $.s[1].x: expected 2, got 5"},
	// The same meaning in other bytes.
	{"keys in another order", `{"a":1,"b":[true,null]}`, `{"b":[true,null],"a":1}`, ""},
	{"white space", `{"a": [1, 2]}`, "{\"a\":[1,2]}\n", ""},
	{"an escaped letter", `"a"`, `"\u0061"`, ""},
	{"two empty objects", `{}`, `{ }`, ""},
	{"two nulls", `null`, `null`, ""},
}

// firstDifference tells every difference of kind, of literal, of keys and
// of length, the first one in the expected document's order, and finds
// none between documents that mean the same.
func TestFirstDifference(t *testing.T) {
	for _, tc := range jsonPairs {
		t.Run(tc.name, func(t *testing.T) {
			want, err := parseJSON([]byte(tc.want))
			if err != nil {
				t.Fatalf("parseJSON(%q): %v", tc.want, err)
			}
			got, err := parseJSON([]byte(tc.got))
			if err != nil {
				t.Fatalf("parseJSON(%q): %v", tc.got, err)
			}
			d, differs := firstDifference("$", want, got)
			if differs != (tc.line != "") || differs && d.String() != tc.line {
				t.Fatalf("%s against %s: differs %v, %q; want %q", tc.want, tc.got, differs, d, tc.line)
			}
			if _, back := firstDifference("$", got, want); back != differs {
				t.Fatalf("%s against %s differs %v, but the other way round %v", tc.want, tc.got, differs, back)
			}
		})
	}
}
