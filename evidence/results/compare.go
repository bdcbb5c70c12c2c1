package results

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"
)

// jsonKind is what a JSON value is. Comparing kinds first keeps an empty
// object, an empty array and null apart however they are stored.
type jsonKind uint8

const (
	jsonNull jsonKind = iota + 1 // zero is no kind, so a value never built by the parser stands out
	jsonBool
	jsonNumber
	jsonString
	jsonArray
	jsonObject
)

// Value is a decoded JSON value that keeps the order of object keys, so
// that the first difference can be reported in document order.
type Value struct {
	kind jsonKind
	// literal is a scalar's meaning as text: true, false or null; a
	// number's literal exactly as written, so 1 and 1.0 differ (results.json
	// holds only integers, and a number spelled otherwise is a difference);
	// a string's decoded content, quoted again.
	literal string
	keys    []string // an object's keys in document order
	fields  map[string]*Value
	items   []*Value // an array's elements
}

// maxJSONDepth is encoding/json's own nesting limit, so that what parseJSON
// refuses for depth, json.Valid refuses too. Without a limit a file of
// nested brackets overflows the stack, which no recover can catch.
const maxJSONDepth = 10000

// parseJSON decodes exactly one JSON document and rejects trailing data,
// duplicate keys, bytes that are not UTF-8 and nesting deeper than
// maxJSONDepth. The --check file is untrusted: whatever it holds, the
// answer is a value or an error.
func parseJSON(data []byte) (*Value, error) {
	if !utf8.Valid(data) {
		return nil, errors.New("not UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec, 0)
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("unexpected end of JSON input")
		}
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("data after the JSON document")
	}
	return v, nil
}

// decodeValue decodes the value that starts at dec's next token; depth is
// how many arrays and objects enclose it.
func decodeValue(dec *json.Decoder, depth int) (*Value, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		if depth == maxJSONDepth {
			return nil, fmt.Errorf("nested deeper than %d", maxJSONDepth)
		}
		switch t {
		case '{':
			return decodeObject(dec, depth+1)
		case '[':
			return decodeArray(dec, depth+1)
		}
		return nil, fmt.Errorf("unexpected %v", t)
	case string:
		return &Value{kind: jsonString, literal: strconv.Quote(t)}, nil
	case json.Number:
		return &Value{kind: jsonNumber, literal: t.String()}, nil
	case bool:
		return &Value{kind: jsonBool, literal: strconv.FormatBool(t)}, nil
	case nil:
		return &Value{kind: jsonNull, literal: "null"}, nil
	}
	return nil, fmt.Errorf("unexpected token %v", tok)
}

// decodeObject decodes an object's members after its '{' and consumes its
// '}'; depth counts the object itself.
func decodeObject(dec *json.Decoder, depth int) (*Value, error) {
	v := &Value{kind: jsonObject, fields: map[string]*Value{}}
	for dec.More() {
		keyTok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		// The decoder refuses a key that is not a string; checked all the
		// same, so that a change in it is an error here and not a panic.
		key, ok := keyTok.(string)
		if !ok {
			return nil, fmt.Errorf("object key %v is not a string", keyTok)
		}
		if _, dup := v.fields[key]; dup {
			return nil, fmt.Errorf("duplicate key %q", key)
		}
		field, err := decodeValue(dec, depth)
		if err != nil {
			return nil, err
		}
		v.keys = append(v.keys, key)
		v.fields[key] = field
	}
	if err := closeWith(dec, '}'); err != nil {
		return nil, err
	}
	return v, nil
}

// decodeArray decodes an array's elements after its '[' and consumes its
// ']'; depth counts the array itself.
func decodeArray(dec *json.Decoder, depth int) (*Value, error) {
	v := &Value{kind: jsonArray}
	for dec.More() {
		item, err := decodeValue(dec, depth)
		if err != nil {
			return nil, err
		}
		v.items = append(v.items, item)
	}
	if err := closeWith(dec, ']'); err != nil {
		return nil, err
	}
	return v, nil
}

// closeWith consumes the delimiter that ends the current array or object.
func closeWith(dec *json.Decoder, end json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok != end {
		return fmt.Errorf("%v where %v was expected", tok, end)
	}
	return nil
}

// Difference is the first place, in the expected document's order, where
// two JSON documents disagree.
type Difference struct {
	path, want, got string
}

// String says where the documents differ and how, on one line.
func (d Difference) String() string {
	return fmt.Sprintf("at %s: expected %s, got %s", d.path, d.want, d.got)
}

// firstDifference returns the first differing path, or false when the two
// values mean the same. Values of different kinds always differ, empty or
// not; object keys may come in any order; numbers differ when their
// literals do.
func firstDifference(path string, want, got *Value) (Difference, bool) {
	if want.kind != got.kind {
		return Difference{path, want.brief(), got.brief()}, true
	}
	switch want.kind {
	case jsonObject:
		for _, k := range want.keys {
			g, ok := got.fields[k]
			if !ok {
				return Difference{path + "." + k, want.fields[k].brief(), "no such key"}, true
			}
			if d, ok := firstDifference(path+"."+k, want.fields[k], g); ok {
				return d, true
			}
		}
		for _, k := range got.keys {
			if _, ok := want.fields[k]; !ok {
				return Difference{path + "." + k, "no such key", got.fields[k].brief()}, true
			}
		}
		return Difference{}, false
	case jsonArray:
		for i := range min(len(want.items), len(got.items)) {
			if d, ok := firstDifference(fmt.Sprintf("%s[%d]", path, i), want.items[i], got.items[i]); ok {
				return d, true
			}
		}
		if len(want.items) != len(got.items) {
			return Difference{path, fmt.Sprintf("%d elements", len(want.items)), fmt.Sprintf("%d elements", len(got.items))}, true
		}
		return Difference{}, false
	}
	if want.literal != got.literal {
		return Difference{path, want.brief(), got.brief()}, true
	}
	return Difference{}, false
}

// brief is a short rendering of a value for a one-line message.
func (v *Value) brief() string {
	switch v.kind {
	case jsonObject:
		return fmt.Sprintf("an object with %d keys", len(v.keys))
	case jsonArray:
		return fmt.Sprintf("an array of %d elements", len(v.items))
	}
	const limit = 80
	if len(v.literal) <= limit {
		return v.literal
	}
	cut := limit
	for !utf8.RuneStart(v.literal[cut]) { // never cut a character in two
		cut--
	}
	return v.literal[:cut] + "…"
}

// Parse reads one JSON document to compare, refusing a malformed one:
// the --check file is untrusted input.
func Parse(data []byte) (*Value, error) { return parseJSON(data) }

// Compare returns the first place, in want's document order, where got
// means something else, and false when the two mean the same.
func Compare(want, got *Value) (Difference, bool) { return firstDifference("$", want, got) }
