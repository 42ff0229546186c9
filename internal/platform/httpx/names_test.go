package httpx

import (
	"net/http"
	"strings"
	"testing"
)

// encoding/json alone would accept every one of these: keys match fields
// case-insensitively and a repeated key overwrites the first.
func TestBindJSON_FieldNamesAreCaseSensitiveAndNeverRepeated(t *testing.T) {
	t.Parallel()
	e := bindEngine(t)
	cases := []struct {
		name, route, body, detail string
	}{
		{"case variant of a field", "/strict", `{"Currency":"CNY"}`, `Unknown field "Currency" (field names are case-sensitive: "currency")`},
		{"case variant nested", "/strict", `{"items":[{"SKU":"a"}]}`, `Unknown field "items[0].SKU"`},
		{"repeated key", "/strict", `{"currency":"CNY","currency":"USD"}`, `Duplicate field "currency"`},
		{"repeated key nested", "/strict", `{"items":[{"sku":"a"},{"sku":"b","sku":"c"}]}`, `Duplicate field "items[1].sku"`},
		{"lenient: repeated known key", "/lenient", `{"payment_id":"p1","payment_id":"p2"}`, `Duplicate field "payment_id"`},
		{"lenient: case variant of a known key", "/lenient", `{"Payment_ID":"p2","payment_id":"p1"}`, `case-sensitive`},
		{"lenient: repeated unknown key", "/lenient", `{"payment_id":"p1","extra":{"a":1,"a":2}}`, `Duplicate field "extra.a"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := mustProblemBody(t, do(t, e, "POST", tc.route, strings.NewReader(tc.body)), http.StatusBadRequest, "invalid_json")
			if !strings.Contains(p.Detail, tc.detail) {
				t.Errorf("detail = %q, want it to contain %q", p.Detail, tc.detail)
			}
		})
	}
	// Exact names still pass, as do unknown fields on the lenient binder.
	if rec := do(t, e, "POST", "/strict", strings.NewReader(`{"currency":"CNY","items":[{"sku":"a"},{"sku":"b"}],"note":"x"}`)); rec.Code != http.StatusOK {
		t.Errorf("exact names: %d %s", rec.Code, rec.Body)
	}
	if rec := do(t, e, "POST", "/lenient", strings.NewReader(`{"payment_id":"p1","Gateway_Extra":1}`)); rec.Code != http.StatusOK {
		t.Errorf("lenient unknown field: %d %s", rec.Code, rec.Body)
	}
}
