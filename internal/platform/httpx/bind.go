package httpx

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/onceonly/onceonly/internal/platform/apperr"
)

type bodyKey struct{}

type cachedBody struct {
	b   []byte
	err error
}

// ReadBody returns the request body, read once under the body limit and cached
// on c, so a signature check and a binder see the same bytes. Outside an engine
// built by NewEngine the limit is DefaultMaxBody. A body over the limit is a
// 413 body_too_large *apperr.Error; a body that fails to arrive is a 400
// invalid_request one.
func ReadBody(c *gin.Context) ([]byte, error) {
	if v, ok := c.Get(bodyKey{}); ok {
		cb := v.(cachedBody)
		return cb.b, cb.err
	}
	b, err := readBody(c)
	c.Set(bodyKey{}, cachedBody{b, err})
	if err == nil {
		// Code that reads c.Request.Body directly still gets the bytes.
		c.Request.Body = io.NopCloser(bytes.NewReader(b))
	}
	return b, err
}

func readBody(c *gin.Context) ([]byte, error) {
	body := c.Request.Body
	if body == nil || body == http.NoBody {
		return []byte{}, nil
	}
	if _, limited := c.Get(maxBodyKey{}); !limited {
		body = http.MaxBytesReader(unwrapWriter(c.Writer), body, DefaultMaxBody)
	}
	b, err := io.ReadAll(body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, apperr.Wrap(err, apperr.BodyTooLarge, "%s", tooLargeDetail(mbe.Limit))
		}
		return nil, apperr.Wrap(err, apperr.InvalidRequest, "Could not read the request body.")
	}
	return b, nil
}

// BindJSON decodes a required JSON body into v strictly: unknown fields, wrong
// types, trailing data after the value, and an empty or null body are 400
// invalid_json. Every non-nil error is an *apperr.Error (413 for an oversize
// body; 500 internal only if v is not a pointer, a programming error).
func BindJSON(c *gin.Context, v any) error {
	b, err := ReadBody(c)
	if err != nil {
		return err
	}
	switch trimmed := trimJSONSpace(b); {
	case len(trimmed) == 0:
		return apperr.New(apperr.InvalidJSON, "Request body is empty; a JSON object is required.")
	case string(trimmed) == "null":
		return apperr.New(apperr.InvalidJSON, "Request body is null; a JSON object is required.")
	}
	return decode(b, v, true)
}

// BindOptionalJSON is for POST routes that need no input: an empty body,
// whitespace, null or {} are accepted; anything else is decoded strictly into v,
// as BindJSON does. A nil v accepts no fields at all.
func BindOptionalJSON(c *gin.Context, v any) error {
	b, err := ReadBody(c)
	if err != nil {
		return err
	}
	if len(trimJSONSpace(b)) == 0 {
		return nil
	}
	if v == nil {
		v = &struct{}{}
	}
	return decode(b, v, true)
}

// BindJSONLenient decodes like BindJSON but ignores unknown fields: for the
// payment gateway's callback, where a 400 on a field the gateway added would
// make it retry for ever. Types of known fields stay strict.
func BindJSONLenient(c *gin.Context, v any) error {
	b, err := ReadBody(c)
	if err != nil {
		return err
	}
	if t := trimJSONSpace(b); len(t) == 0 || string(t) == "null" {
		return apperr.New(apperr.InvalidJSON, "Request body is empty; a JSON object is required.")
	}
	return decode(b, v, false)
}

func decode(b []byte, v any, strict bool) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		return decodeError(err)
	}
	// Decode stops after the first value; "{}{...}" or "{} garbage" would
	// otherwise pass with the tail silently ignored.
	if _, err := dec.Token(); err != io.EOF {
		return apperr.New(apperr.InvalidJSON, "Unexpected data after the JSON value.")
	}
	if err := checkNames(b, reflect.TypeOf(v)); err != nil {
		return decodeError(err)
	}
	return nil
}

const unknownFieldPrefix = "json: unknown field "

// decodeError turns a decoder error into a detail that tells the client what
// to fix, quoting at most a bounded part of what it sent.
func decodeError(err error) error {
	var (
		ae  *apperr.Error
		se  *json.SyntaxError
		te  *json.UnmarshalTypeError
		iue *json.InvalidUnmarshalError
	)
	switch {
	case errors.As(err, &ae):
		return ae // a custom UnmarshalJSON already said what is wrong
	case errors.As(err, &iue):
		return apperr.Wrap(err, apperr.Internal, "")
	case errors.As(err, &se):
		return apperr.Wrap(err, apperr.InvalidJSON, "Malformed JSON at byte offset %d.", se.Offset)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return apperr.Wrap(err, apperr.InvalidJSON, "Malformed JSON: unexpected end of input.")
	case errors.As(err, &te):
		want := jsonKind(te.Type)
		got := clip(te.Value, 40)
		if te.Field == "" {
			return apperr.Wrap(err, apperr.InvalidJSON, "Request body must be %s, not %s.", want, got)
		}
		return apperr.Wrap(err, apperr.InvalidJSON, "Field %q must be %s, not %s.", clip(te.Field, 128), want, got)
	case strings.HasPrefix(err.Error(), unknownFieldPrefix):
		// encoding/json v1 has no typed error for this; the message format is
		// covered by TestBindJSON_UnknownFieldIsNamed.
		name := strings.TrimPrefix(err.Error(), unknownFieldPrefix)
		if u, uerr := strconv.Unquote(name); uerr == nil {
			name = u
		}
		return apperr.Wrap(err, apperr.InvalidJSON, "Unknown field %q.", clip(name, 128))
	default:
		return apperr.Wrap(err, apperr.InvalidJSON, "A value has an invalid format.")
	}
}

// jsonKind names a Go type the way a JSON client thinks of it.
func jsonKind(t reflect.Type) string {
	if t == nil {
		return "a different type"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	default:
		return "a different type"
	}
}

// clip bounds text echoed from the request, cutting on a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// trimJSONSpace trims only what JSON calls whitespace, so "\v" is not taken
// for an empty body.
func trimJSONSpace(b []byte) []byte {
	return bytes.Trim(b, " \t\r\n")
}
