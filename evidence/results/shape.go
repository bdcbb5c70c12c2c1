package results

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// CheckShape fails unless v has the shape of a document this command
// writes: a Results of this Schema, every key the command always writes
// present, no key it never writes, and every value of the kind its field
// holds (an integer where the field is an integer). Only where a field may
// be left out (omitempty) or be null (a pointer, a slice) is either
// accepted. What the values say is left to Compare.
//
// The --check file is checked with it before anything runs: a file of
// another shape can never match, and a run takes seconds.
func CheckShape(v *Value) error {
	if err := shapeOf("$", v, reflect.TypeFor[Results]()); err != nil {
		return err
	}
	if schema := v.fields["schema"]; schema.literal != strconv.Quote(Schema) {
		return fmt.Errorf("at $.schema: this command writes %q, not %s", Schema, schema.brief())
	}
	return nil
}

// shapeOf checks that v, at path, is what encoding/json makes of a value
// of type t.
func shapeOf(path string, v *Value, t reflect.Type) error {
	switch t.Kind() {
	case reflect.Pointer:
		if v.kind == jsonNull {
			return nil
		}
		return shapeOf(path, v, t.Elem())
	case reflect.Struct:
		return objectShape(path, v, t)
	case reflect.Slice:
		if v.kind == jsonNull { // what encoding/json writes for a nil slice
			return nil
		}
		if v.kind != jsonArray {
			return wrongKind(path, "an array", v)
		}
		for i, item := range v.items {
			if err := shapeOf(fmt.Sprintf("%s[%d]", path, i), item, t.Elem()); err != nil {
				return err
			}
		}
		return nil
	case reflect.String:
		if v.kind != jsonString {
			return wrongKind(path, "a string", v)
		}
		return nil
	case reflect.Bool:
		if v.kind != jsonBool {
			return wrongKind(path, "true or false", v)
		}
		return nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if _, err := strconv.ParseInt(v.literal, 10, t.Bits()); v.kind != jsonNumber || err != nil {
			return wrongKind(path, "an integer", v)
		}
		return nil
	}
	// A field of a kind the document does not use yet; TestCheckShape
	// meets every field of Results, so adding one fails there first.
	return fmt.Errorf("at %s: no shape known for %v", path, t)
}

// objectShape checks that v, at path, is an object with the keys that
// encoding/json writes for the struct type t.
func objectShape(path string, v *Value, t reflect.Type) error {
	if v.kind != jsonObject {
		return wrongKind(path, "an object", v)
	}
	fields, err := jsonFields(t)
	if err != nil {
		return fmt.Errorf("at %s: %w", path, err)
	}
	for _, f := range fields {
		if _, ok := v.fields[f.name]; !ok && !f.omitEmpty {
			return fmt.Errorf("at %s.%s: missing; the command always writes it", path, f.name)
		}
	}
	for _, key := range v.keys {
		i := fieldIndex(fields, key)
		if i < 0 {
			return fmt.Errorf("at %s.%s: no such key in a document the command writes", path, key)
		}
		if err := shapeOf(path+"."+key, v.fields[key], fields[i].typ); err != nil {
			return err
		}
	}
	return nil
}

// jsonField is one struct field as encoding/json names it.
type jsonField struct {
	name      string
	typ       reflect.Type
	omitEmpty bool
}

// jsonFields lists the fields encoding/json encodes for struct type t.
func jsonFields(t reflect.Type) ([]jsonField, error) {
	var fields []jsonField
	for f := range t.Fields() {
		tag := f.Tag.Get("json")
		if !f.IsExported() || tag == "-" {
			continue
		}
		if f.Anonymous {
			return nil, fmt.Errorf("no shape known for the embedded field %s of %v", f.Name, t)
		}
		name, options, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		omitEmpty := false
		for option := range strings.SplitSeq(options, ",") {
			omitEmpty = omitEmpty || option == "omitempty"
		}
		fields = append(fields, jsonField{name: name, typ: f.Type, omitEmpty: omitEmpty})
	}
	return fields, nil
}

// fieldIndex returns the index of the field named key, or -1. Keys match
// exactly: the command writes them in one spelling, and a key spelt
// otherwise is not one it writes.
func fieldIndex(fields []jsonField, key string) int {
	for i, f := range fields {
		if f.name == key {
			return i
		}
	}
	return -1
}

// wrongKind says that the value at path is not of the kind want.
func wrongKind(path, want string, v *Value) error {
	return fmt.Errorf("at %s: expected %s, got %s", path, want, v.brief())
}
