package httpx

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"sync"

	"github.com/onceonly/onceonly/internal/platform/apperr"
)

// checkNames closes two holes that encoding/json leaves in a strict API: it
// matches object keys to fields case-insensitively ({"Currency": …} fills
// Currency although the contract names it "currency"), and a repeated key
// silently overwrites the first ({"currency":"CNY",…,"currency":"USD"} is
// USD — while a signature, a log line or a proxy may have read CNY). b has
// already decoded into a value of type t, so it is well-formed JSON.
func checkNames(b []byte, t reflect.Type) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	return walk(dec, t, "")
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

func walk(dec *json.Decoder, t reflect.Type, path string) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t != nil && (reflect.PointerTo(t).Implements(unmarshalerType) || t.Implements(unmarshalerType)) {
		t = nil // its own decoder decides what it accepts; still walk for duplicates
	}
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case json.Delim('{'):
		var fields map[string]reflect.Type
		var elem reflect.Type
		if t != nil {
			switch t.Kind() {
			case reflect.Struct:
				fields = fieldsOf(t)
			case reflect.Map:
				elem = t.Elem()
			}
		}
		seen := map[string]bool{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return err
			}
			key := kt.(string)
			name := join(path, key)
			if seen[key] {
				return apperr.New(apperr.InvalidJSON, "Duplicate field %q.", clip(name, 128))
			}
			seen[key] = true
			next := elem
			if fields != nil {
				ft, exact := fields[key]
				if !exact {
					for f := range fields {
						if strings.EqualFold(f, key) {
							return apperr.New(apperr.InvalidJSON, "Unknown field %q (field names are case-sensitive: %q).",
								clip(name, 128), join(path, f))
						}
					}
				}
				next = ft
			}
			if err := walk(dec, next, name); err != nil {
				return err
			}
		}
		_, err = dec.Token() // '}'
		return err
	case json.Delim('['):
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for i := 0; dec.More(); i++ {
			if err := walk(dec, elem, path+"["+itoa(i)+"]"); err != nil {
				return err
			}
		}
		_, err = dec.Token() // ']'
		return err
	}
	return nil
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func itoa(i int) string {
	var b [20]byte
	n := len(b)
	for {
		n--
		b[n] = byte('0' + i%10)
		if i /= 10; i == 0 {
			return string(b[n:])
		}
	}
}

var fieldCache sync.Map // reflect.Type → map[string]reflect.Type

// fieldsOf lists the JSON names of t's fields as encoding/json sees them
// (tags, embedded structs promoted, "-" and unexported fields left out).
func fieldsOf(t reflect.Type) map[string]reflect.Type {
	if f, ok := fieldCache.Load(t); ok {
		return f.(map[string]reflect.Type)
	}
	out := map[string]reflect.Type{}
	for _, f := range reflect.VisibleFields(t) {
		if !f.IsExported() || len(f.Index) > 1 && !promoted(t, f.Index) {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" && indirect(f.Type).Kind() == reflect.Struct {
			continue // its fields are promoted and listed themselves
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	fieldCache.Store(t, out)
	return out
}

// promoted reports whether the field at index is reached through untagged
// embedded structs only (encoding/json promotes just those).
func promoted(t reflect.Type, index []int) bool {
	for _, i := range index[:len(index)-1] {
		f := indirect(t).Field(i)
		if !f.Anonymous || f.Tag.Get("json") != "" {
			return false
		}
		t = f.Type
	}
	return true
}

func indirect(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}
