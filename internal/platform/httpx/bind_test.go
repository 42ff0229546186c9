package httpx

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
)

type orderItem struct {
	SKU        string `json:"sku"`
	Quantity   int    `json:"quantity"`
	PriceCents int64  `json:"price_cents"`
}

type orderInput struct {
	Currency string      `json:"currency"`
	Items    []orderItem `json:"items"`
	Note     *string     `json:"note,omitempty"`
}

// bindEngine exposes each binder on its own route; a bind error is answered
// through Error, as a real handler does.
func bindEngine(t *testing.T) *testEngine {
	t.Helper()
	e := newTestEngine(t)
	e.POST("/strict", func(c *gin.Context) {
		var in orderInput
		if err := BindJSON(c, &in); err != nil {
			Error(c, err)
			return
		}
		JSON(c, http.StatusOK, in)
	})
	e.POST("/optional", func(c *gin.Context) {
		if err := BindOptionalJSON(c, nil); err != nil {
			Error(c, err)
			return
		}
		c.Status(http.StatusNoContent)
	})
	e.POST("/optional-typed", func(c *gin.Context) {
		var in struct {
			Copies int `json:"copies"`
		}
		if err := BindOptionalJSON(c, &in); err != nil {
			Error(c, err)
			return
		}
		JSON(c, http.StatusOK, in)
	})
	e.POST("/lenient", func(c *gin.Context) {
		var in struct {
			PaymentID   string `json:"payment_id"`
			AmountCents int64  `json:"amount_cents"`
		}
		if err := BindJSONLenient(c, &in); err != nil {
			Error(c, err)
			return
		}
		JSON(c, http.StatusOK, in)
	})
	e.POST("/raw", func(c *gin.Context) {
		b, err := io.ReadAll(c.Request.Body)
		if err != nil {
			Error(c, err)
			return
		}
		c.String(http.StatusOK, "%d", len(b))
	})
	return e
}

// chunked hides the length, as a client streaming without Content-Length.
type chunked struct{ io.Reader }

func TestBodyLimit_OverLimitIs413WithOrWithoutContentLength(t *testing.T) {
	t.Parallel()
	e := bindEngine(t)
	over := `{"currency":"` + strings.Repeat("x", int(DefaultMaxBody)) + `"}`
	// Exactly at the limit is still accepted: the bound is inclusive.
	atLimit := `{"currency":"CNY"}` + strings.Repeat(" ", int(DefaultMaxBody)-len(`{"currency":"CNY"}`))
	for _, path := range []string{"/strict", "/optional", "/lenient", "/raw"} {
		t.Run("content-length"+path, func(t *testing.T) {
			t.Parallel()
			mustProblemBody(t, do(t, e, "POST", path, strings.NewReader(over)), http.StatusRequestEntityTooLarge, "body_too_large")
		})
		t.Run("chunked"+path, func(t *testing.T) {
			t.Parallel()
			req := httptest.NewRequest("POST", path, chunked{strings.NewReader(over)})
			if req.ContentLength != -1 && req.ContentLength != 0 {
				t.Fatalf("request declares a length: %d", req.ContentLength)
			}
			req.ContentLength = -1
			rec := httptest.NewRecorder()
			e.ServeHTTP(rec, req)
			mustProblemBody(t, rec, http.StatusRequestEntityTooLarge, "body_too_large")
		})
	}
	if rec := do(t, e, "POST", "/strict", strings.NewReader(atLimit)); rec.Code != http.StatusOK {
		t.Errorf("body of exactly %d bytes: %d %s", DefaultMaxBody, rec.Code, rec.Body)
	}
}

func TestBindJSON_RejectsAnythingButOneWellTypedObject(t *testing.T) {
	t.Parallel()
	e := bindEngine(t)
	cases := []struct {
		name, body string
		status     int
		detail     string // substring of the problem detail
	}{
		{"valid", `{"currency":"CNY","items":[{"sku":"a","quantity":2,"price_cents":100}]}`, 200, ""},
		{"valid with surrounding whitespace", " \n{\"currency\":\"CNY\"}\t\r\n", 200, ""},
		{"unknown top-level field", `{"currency":"CNY","coupon":"FREE"}`, 400, `Unknown field "coupon"`},
		{"unknown nested field", `{"items":[{"sku":"a","colour":"red"}]}`, 400, `Unknown field "colour"`},
		{"wrong type names the field", `{"currency":7}`, 400, `Field "currency" must be a string, not number`},
		{"wrong nested type names the path", `{"items":[{"quantity":"2"}]}`, 400, `Field "items.quantity" must be an integer, not string`},
		{"fraction into integer", `{"items":[{"quantity":1.5}]}`, 400, `"items.quantity" must be an integer`},
		{"integer overflow", `{"items":[{"price_cents":1e30}]}`, 400, `"items.price_cents" must be an integer`},
		{"array instead of object", `[1,2]`, 400, "Request body must be an object, not array"},
		{"trailing garbage", `{"currency":"CNY"} x`, 400, "after the JSON value"},
		{"second object", `{"currency":"CNY"}{"currency":"USD"}`, 400, "after the JSON value"},
		{"truncated", `{"currency":"CN`, 400, "unexpected end of input"},
		{"syntax error", `{"currency" "CNY"}`, 400, "Malformed JSON at byte offset"},
		{"empty", ``, 400, "empty"},
		{"whitespace only", " \n\t", 400, "empty"},
		{"null", `null`, 400, "null"},
		{"vertical tab is not JSON whitespace", "\v", 400, "Malformed JSON"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rec := do(t, e, "POST", "/strict", strings.NewReader(tc.body))
			if tc.status == http.StatusOK {
				if rec.Code != http.StatusOK {
					t.Fatalf("status = %d; %s", rec.Code, rec.Body)
				}
				return
			}
			p := mustProblemBody(t, rec, tc.status, "invalid_json")
			if !strings.Contains(p.Detail, tc.detail) {
				t.Errorf("detail = %q, want it to contain %q", p.Detail, tc.detail)
			}
		})
	}
}

func TestBindJSON_UnknownFieldIsNamed(t *testing.T) {
	t.Parallel()
	// decodeError recognises this case by encoding/json's message text; this
	// test fails if a Go release changes it.
	p := mustProblemBody(t, do(t, bindEngine(t), "POST", "/strict", strings.NewReader(`{"Évil\"name":1}`)),
		http.StatusBadRequest, "invalid_json")
	if want := `Unknown field "Évil\"name".`; p.Detail != want {
		t.Errorf("detail = %q, want %q", p.Detail, want)
	}
}

func TestBindOptionalJSON_AcceptsNoInputAndDecodesTheRestStrictly(t *testing.T) {
	t.Parallel()
	e := bindEngine(t)
	cases := []struct {
		name, path, body string
		status           int
	}{
		{"empty", "/optional", "", 204},
		{"whitespace", "/optional", " \r\n\t", 204},
		{"empty object", "/optional", "{}", 204},
		{"empty object with spaces", "/optional", " { } ", 204},
		{"null", "/optional", "null", 204},
		{"any field when none is accepted", "/optional", `{"x":1}`, 400},
		{"array", "/optional", `[]`, 400},
		{"garbage", "/optional", `nope`, 400},
		{"trailing data", "/optional", `{} {}`, 400},
		{"known field", "/optional-typed", `{"copies":3}`, 200},
		{"wrong type", "/optional-typed", `{"copies":"3"}`, 400},
		{"unknown field", "/optional-typed", `{"copies":3,"x":1}`, 400},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rec := do(t, e, "POST", tc.path, strings.NewReader(tc.body))
			if tc.status == http.StatusBadRequest {
				mustProblemBody(t, rec, tc.status, "invalid_json")
				return
			}
			if rec.Code != tc.status {
				t.Errorf("status = %d, want %d; %s", rec.Code, tc.status, rec.Body)
			}
		})
	}
}

func TestBindJSONLenient_IgnoresUnknownFieldsButNotWrongTypes(t *testing.T) {
	t.Parallel()
	e := bindEngine(t)
	rec := do(t, e, "POST", "/lenient", strings.NewReader(`{"payment_id":"p1","amount_cents":500,"gateway_added":{"x":[1]}}`))
	if rec.Code != http.StatusOK || rec.Body.String() != `{"payment_id":"p1","amount_cents":500}` {
		t.Errorf("unknown field: %d %s", rec.Code, rec.Body)
	}
	p := mustProblemBody(t, do(t, e, "POST", "/lenient", strings.NewReader(`{"payment_id":"p1","amount_cents":"500"}`)),
		http.StatusBadRequest, "invalid_json")
	if !strings.Contains(p.Detail, "amount_cents") {
		t.Errorf("detail = %q, want the field named", p.Detail)
	}
	for _, body := range []string{``, `null`, `{"payment_id":"p1"} trailing`, `{"unknown": ]}`} {
		mustProblemBody(t, do(t, e, "POST", "/lenient", strings.NewReader(body)), http.StatusBadRequest, "invalid_json")
	}
}

func TestReadBody_SignatureCheckAndBinderSeeTheSameBytes(t *testing.T) {
	t.Parallel()
	key := []byte("k")
	body := `{"payment_id":"p1","amount_cents":500,"extra":true}`
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(body))
	sig := hex.EncodeToString(mac.Sum(nil))

	e := newTestEngine(t)
	e.POST("/callback", func(c *gin.Context) {
		raw, err := ReadBody(c)
		if err != nil {
			Error(c, err)
			return
		}
		m := hmac.New(sha256.New, key)
		m.Write(raw)
		if !hmac.Equal([]byte(hex.EncodeToString(m.Sum(nil))), []byte(c.GetHeader("X-Sig"))) {
			c.Status(http.StatusUnauthorized)
			return
		}
		var in struct {
			PaymentID   string `json:"payment_id"`
			AmountCents int64  `json:"amount_cents"`
		}
		if err := BindJSONLenient(c, &in); err != nil {
			Error(c, err)
			return
		}
		again, _ := ReadBody(c)
		direct, _ := io.ReadAll(c.Request.Body)
		if !bytes.Equal(raw, again) || !bytes.Equal(raw, direct) {
			c.String(http.StatusConflict, "bytes differ")
			return
		}
		JSON(c, http.StatusOK, in)
	})
	rec := do(t, e, "POST", "/callback", strings.NewReader(body), "X-Sig", sig)
	if rec.Code != http.StatusOK || rec.Body.String() != `{"payment_id":"p1","amount_cents":500}` {
		t.Errorf("got %d %s", rec.Code, rec.Body)
	}
}

func TestReadBody_OutsideNewEngineIsStillLimited(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	c, _ := gin.CreateTestContext(rec)
	c.Request = httptest.NewRequest("POST", "/", chunked{strings.NewReader(strings.Repeat("x", int(DefaultMaxBody)+1))})
	var v map[string]any
	err := BindJSON(c, &v)
	if p, _ := ProblemOf(err); p.Status != http.StatusRequestEntityTooLarge {
		t.Errorf("err = %v, want 413 body_too_large", err)
	}
}

func TestBodyLimit_ChunkedUploadOverTheWireIs413(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(bindEngine(t))
	t.Cleanup(srv.Close)
	body := `{"currency":"` + strings.Repeat("x", 2*int(DefaultMaxBody)) + `"}`
	// chunked hides the length, so net/http sends Transfer-Encoding: chunked.
	req, err := http.NewRequest("POST", srv.URL+"/strict", chunked{strings.NewReader(body)})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(b), `"code":"body_too_large"`) ||
		resp.Header.Get(RequestIDHeader) == "" {
		t.Errorf("got %d %v %s, want 413 body_too_large with X-Request-ID", resp.StatusCode, resp.Header, b)
	}
	if !resp.Close {
		// Below net/http's 256 KiB drain allowance the server would otherwise
		// read the rest of the upload to keep the connection.
		t.Error("connection kept alive after an oversize upload")
	}
}
