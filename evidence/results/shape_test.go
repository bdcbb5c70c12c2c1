package results

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// schedule matches a counterexample's schedule in the filled document.
var schedule = regexp.MustCompile(`"schedule": \[[^\]]*\]`)

// filled is a document in which every field, at every depth, holds
// something: every pointer set, every slice one element long, every
// omitempty field present. CheckShape must accept it, so that a field
// added to Results of a kind CheckShape does not know fails here.
func filled(t *testing.T) string {
	t.Helper()
	var doc Results
	fill(reflect.ValueOf(&doc).Elem())
	doc.Schema = Schema
	data, err := Encode(&doc)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func fill(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem())
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i))
			}
		}
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0))
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64:
		v.SetInt(1)
	}
}

func TestCheckShapeAcceptsWhatTheCommandWrites(t *testing.T) {
	committed, err := os.ReadFile("../../results.json")
	if err != nil {
		t.Fatal(err)
	}
	var empty Results
	empty.Schema = Schema
	emptyDoc, err := Encode(&empty)
	if err != nil {
		t.Fatal(err)
	}
	for name, doc := range map[string]string{
		"results.json":          string(committed),
		"every field filled":    filled(t),
		"every field left zero": string(emptyDoc),
	} {
		t.Run(name, func(t *testing.T) {
			v, err := Parse([]byte(doc))
			if err != nil {
				t.Fatal(err)
			}
			if err := CheckShape(v); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Valid JSON of another shape than the command writes: refused, naming
// the first place where it differs.
func TestCheckShapeRefusesAnotherShape(t *testing.T) {
	doc := filled(t)
	// replace changes the first occurrence of old in the filled document,
	// failing the test if there is none.
	replace := func(old, new string) string {
		if !strings.Contains(doc, old) {
			t.Fatalf("the filled document has no %q", old)
		}
		return strings.Replace(doc, old, new, 1)
	}
	cases := []struct{ name, input, want string }{
		{"an array", `[1,2,3]`, "at $: expected an object, got an array of 3 elements"},
		{"a string", `"leases-experiment/5"`, `at $: expected an object, got "leases-experiment/5"`},
		{"null", `null`, "at $: expected an object, got null"},
		{"an empty object", `{}`, "at $.schema: missing"},
		{"another schema", replace(`"schema": "`+Schema+`"`, `"schema": "leases-experiment/3"`), `at $.schema: this command writes "` + Schema + `", not "leases-experiment/3"`},
		{"the schema an array", replace(`"schema": "`+Schema+`"`, `"schema": []`), "at $.schema: expected a string, got an array of 0 elements"},
		{"a string where a number goes", replace(`"tick": 1`, `"tick": "1"`), `at $.backends[0].scenarios[0].steps[0].tick: expected an integer, got "1"`},
		{"a fraction where an integer goes", replace(`"ttl": 1`, `"ttl": 1.5`), "at $.backends[0].scenarios[0].parameters.ttl: expected an integer, got 1.5"},
		{"an integer spelt as a fraction", replace(`"ttl": 1`, `"ttl": 1.0`), "parameters.ttl: expected an integer, got 1.0"},
		{"an integer too large", replace(`"ttl": 1`, `"ttl": 9223372036854775808`), "parameters.ttl: expected an integer"},
		{"a number where a string goes", replace(`"backend": "x"`, `"backend": 1`), "at $.backends[0].backend: expected a string, got 1"},
		{"a string where a boolean goes", replace(`"members_agree": true`, `"members_agree": "true"`), `verdicts.members_agree: expected true or false, got "true"`},
		{"an object where an array goes", schedule.ReplaceAllString(doc, `"schedule": {}`), "counterexamples[0].schedule: expected an array, got an object with 0 keys"},
		{"a key missing", replace(`"tick": 1,`, ``), "at $.backends[0].scenarios[0].steps[0].tick: missing"},
		{"a key added", replace(`"ttl": 1,`, `"ttl": 1, "clock_skew": 0,`), "at $.backends[0].scenarios[0].parameters.clock_skew: no such key"},
		{"a key in other letters", replace(`"tick": 1,`, `"tick": 1, "Tick": 1,`), "steps[0].Tick: no such key"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v, err := Parse([]byte(tc.input))
			if err != nil {
				t.Fatalf("not even JSON: %v", err)
			}
			err = CheckShape(v)
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("CheckShape: %v; want one line containing %q", err, tc.want)
			}
		})
	}
}

// What the comparison is for stays accepted: a document of the right shape
// that says something else, or leaves out what the command may leave out.
func TestCheckShapeLeavesMeaningToCompare(t *testing.T) {
	doc := filled(t)
	for name, changed := range map[string]string{
		"a value changed":           strings.Replace(doc, `"outcome": "x"`, `"outcome": "stale"`, 1),
		"an array cut short":        schedule.ReplaceAllString(doc, `"schedule": []`),
		"an omitempty key left out": strings.Replace(doc, `"detail": "x",`, ``, 1),
		"a pointer null":            regexp.MustCompile(`"final_receiver_state": \{[^}]*\}`).ReplaceAllString(doc, `"final_receiver_state": null`),
	} {
		t.Run(name, func(t *testing.T) {
			if changed == doc {
				t.Fatal("the change changed nothing")
			}
			v, err := Parse([]byte(changed))
			if err != nil {
				t.Fatal(err)
			}
			if err := CheckShape(v); err != nil {
				t.Fatal(err)
			}
		})
	}
}
