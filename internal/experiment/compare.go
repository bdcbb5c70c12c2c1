package experiment

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// jsonValue is a decoded JSON value that keeps the order of object keys, so
// that the first difference can be reported in document order.
type jsonValue struct {
	keys   []string // object keys in document order; nil for non-objects
	fields map[string]*jsonValue
	items  []*jsonValue // array elements
	array  bool
	scalar string // the literal of a string, number, boolean or null
}

// parseJSON decodes exactly one JSON document and rejects trailing data.
func parseJSON(data []byte) (*jsonValue, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec)
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

func decodeValue(dec *json.Decoder) (*jsonValue, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			v := &jsonValue{keys: []string{}, fields: map[string]*jsonValue{}}
			for dec.More() {
				keyTok, err := dec.Token()
				if err != nil {
					return nil, err
				}
				key := keyTok.(string)
				if _, dup := v.fields[key]; dup {
					return nil, fmt.Errorf("duplicate key %q", key)
				}
				field, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				v.keys = append(v.keys, key)
				v.fields[key] = field
			}
			_, err := dec.Token() // '}'
			return v, err
		case '[':
			v := &jsonValue{array: true}
			for dec.More() {
				item, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				v.items = append(v.items, item)
			}
			_, err := dec.Token() // ']'
			return v, err
		}
		return nil, fmt.Errorf("unexpected %v", t)
	case string:
		return &jsonValue{scalar: strconv.Quote(t)}, nil
	case json.Number:
		return &jsonValue{scalar: t.String()}, nil
	case bool:
		return &jsonValue{scalar: strconv.FormatBool(t)}, nil
	case nil:
		return &jsonValue{scalar: "null"}, nil
	}
	return nil, fmt.Errorf("unexpected token %v", tok)
}

// difference is the first place, in the expected document's order, where
// two JSON documents disagree.
type difference struct {
	path, want, got string
}

// String says where the documents differ and how, on one line.
func (d difference) String() string {
	return fmt.Sprintf("at %s: expected %s, got %s", d.path, d.want, d.got)
}

// firstDifference returns the first differing path, or false when the two
// values mean the same.
func firstDifference(path string, want, got *jsonValue) (difference, bool) {
	switch {
	case want.fields != nil && got.fields != nil:
		for _, k := range want.keys {
			g, ok := got.fields[k]
			if !ok {
				return difference{path + "." + k, want.fields[k].brief(), "no such key"}, true
			}
			if d, ok := firstDifference(path+"."+k, want.fields[k], g); ok {
				return d, true
			}
		}
		for _, k := range got.keys {
			if _, ok := want.fields[k]; !ok {
				return difference{path + "." + k, "no such key", got.fields[k].brief()}, true
			}
		}
		return difference{}, false
	case want.array && got.array:
		for i := range min(len(want.items), len(got.items)) {
			if d, ok := firstDifference(fmt.Sprintf("%s[%d]", path, i), want.items[i], got.items[i]); ok {
				return d, true
			}
		}
		if len(want.items) != len(got.items) {
			return difference{path, fmt.Sprintf("%d elements", len(want.items)), fmt.Sprintf("%d elements", len(got.items))}, true
		}
		return difference{}, false
	case want.fields == nil && !want.array && got.fields == nil && !got.array:
		if want.scalar != got.scalar {
			return difference{path, want.scalar, got.scalar}, true
		}
		return difference{}, false
	}
	return difference{path, want.brief(), got.brief()}, true
}

// brief is a short rendering of a value for a one-line message.
func (v *jsonValue) brief() string {
	switch {
	case v.fields != nil:
		return fmt.Sprintf("an object with %d keys", len(v.keys))
	case v.array:
		return fmt.Sprintf("an array of %d elements", len(v.items))
	}
	const limit = 80
	if len(v.scalar) > limit {
		return v.scalar[:limit] + "…"
	}
	return v.scalar
}
