package idempotency

import (
	"encoding/json"
	"testing"
)

type item struct {
	SKU        string `json:"sku"`
	Quantity   int    `json:"quantity"`
	PriceCents int64  `json:"price_cents"`
}

type orderReq struct {
	Currency string `json:"currency"`
	Items    []item `json:"items"`
}

func TestBodyHash_StableForEqualValuesDistinctForDifferentOnes(t *testing.T) {
	t.Parallel()
	base := orderReq{Currency: "CNY", Items: []item{{"a", 1, 100}, {"b", 2, 50}}}
	h := BodyHash(base)
	if len(h) != 64 {
		t.Fatalf("hash %q is not 64 hex characters", h)
	}
	if again := BodyHash(orderReq{Currency: "CNY", Items: []item{{"a", 1, 100}, {"b", 2, 50}}}); again != h {
		t.Fatalf("equal values hash differently: %s vs %s", again, h)
	}
	for name, v := range map[string]orderReq{
		"currency":    {Currency: "USD", Items: base.Items},
		"quantity":    {Currency: "CNY", Items: []item{{"a", 2, 100}, {"b", 2, 50}}},
		"price":       {Currency: "CNY", Items: []item{{"a", 1, 101}, {"b", 2, 50}}},
		"item order":  {Currency: "CNY", Items: []item{{"b", 2, 50}, {"a", 1, 100}}},
		"extra item":  {Currency: "CNY", Items: []item{{"a", 1, 100}, {"b", 2, 50}, {"c", 1, 1}}},
		"fewer items": {Currency: "CNY", Items: []item{{"a", 1, 100}}},
	} {
		if BodyHash(v) == h {
			t.Errorf("%s: a different request has the same hash", name)
		}
	}
}

func TestBodyHash_IgnoresWhitespaceKeyOrderAndEscapesOfTheClientJSON(t *testing.T) {
	t.Parallel()
	raws := []string{
		`{"currency":"CNY","items":[{"sku":"a","quantity":1,"price_cents":100}]}`,
		"{\n  \"items\": [ { \"price_cents\": 100, \"quantity\": 1, \"sku\": \"a\" } ],\n  \"currency\": \"CNY\"\n}",
		`{"currency":"\u0043NY","items":[{"quantity":1,"sku":"\u0061","price_cents":100}]}`,
	}
	want := ""
	for i, raw := range raws {
		var r orderReq
		if err := json.Unmarshal([]byte(raw), &r); err != nil {
			t.Fatalf("raw body %d: %v", i, err)
		}
		h := BodyHash(r)
		if i == 0 {
			want = h
		} else if h != want {
			t.Errorf("raw body %d hashes to %s, want %s", i, h, want)
		}
	}
}

func TestBodyHash_PanicsOnAValueJSONCannotEncode(t *testing.T) {
	t.Parallel()
	defer func() {
		if recover() == nil {
			t.Fatal("BodyHash(chan) did not panic")
		}
	}()
	BodyHash(make(chan int))
}
