package httpx

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/onceonly/onceonly/internal/platform/apperr"
)

// FuzzBindJSON checks that no body makes a binder panic or answer anything but
// success or a client error: a 5xx here would turn a client's bad input into
// an alert, and a panic into a dropped connection.
func FuzzBindJSON(f *testing.F) {
	for _, s := range []string{
		``, ` `, `null`, `{}`, `[]`, `"x"`, `0`, `{"currency":"CNY"}`,
		`{"currency":"CNY","items":[{"sku":"a","quantity":2,"price_cents":100}],"note":"n"}`,
		`{"currency":"CNY"} x`, `{"currency":"CNY"}{}`, `{"unknown":1}`, `{"items":[{"quantity":"2"}]}`,
		`{"items":[{"quantity":1e400}]}`, `{"items":[{"price_cents":-9223372036854775809}]}`,
		`{"currency":"\ud800"}`, `{"note":null}`, `{"items":null}`, `{"CURRENCY":"x"}`,
		strings.Repeat("[", 20000), `{"a":` + strings.Repeat(`{"a":`, 100),
	} {
		f.Add([]byte(s))
	}
	binders := []struct {
		name string
		bind func(*gin.Context, any) error
	}{
		{"BindJSON", BindJSON}, {"BindOptionalJSON", BindOptionalJSON}, {"BindJSONLenient", BindJSONLenient},
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, b := range binders {
			c, _ := gin.CreateTestContext(httptest.NewRecorder())
			c.Request = httptest.NewRequest("POST", "/", strings.NewReader(string(body)))
			var in orderInput
			err := b.bind(c, &in)
			if err == nil {
				continue
			}
			var ae *apperr.Error
			if !errors.As(err, &ae) {
				t.Fatalf("%s(%q) = %T %v, want *apperr.Error", b.name, body, err, err)
			}
			if s := StatusOf(ae.Code); s < 400 || s >= 500 || s == http.StatusRequestEntityTooLarge && len(body) <= int(DefaultMaxBody) {
				t.Fatalf("%s(%q) = %v (status %d), want a 4xx", b.name, body, err, s)
			}
		}
	})
}
