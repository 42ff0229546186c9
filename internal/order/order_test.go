package order_test

import (
	"strings"
	"testing"

	"github.com/onceonly/onceonly/internal/order"
	"github.com/onceonly/onceonly/internal/platform/apperr"
)

func TestStateMachine_OnlyTheTableEdgesExist(t *testing.T) {
	t.Parallel()
	want := map[[2]order.Status]bool{
		{order.PendingPayment, order.Paid}:      true,
		{order.PendingPayment, order.Cancelled}: true,
	}
	for _, from := range append(order.Statuses, "NEW") {
		for _, to := range append(order.Statuses, "NEW") {
			if got := order.CanTransition(from, to); got != want[[2]order.Status{from, to}] {
				t.Errorf("CanTransition(%s, %s) = %v", from, to, got)
			}
		}
	}
}

func TestParseID_OnlyCanonicalPositiveIDsParse(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]int64{"1": 1, "42": 42, "9223372036854775807": 9223372036854775807} {
		if got, ok := order.ParseID(s); !ok || got != want {
			t.Errorf("ParseID(%q) = %d, %v", s, got, ok)
		}
	}
	for _, s := range []string{"", "0", "07", "+7", "-7", " 7", "7 ", "1e3", "0x1f", "9223372036854775808", "abc", "٣"} {
		if got, ok := order.ParseID(s); ok {
			t.Errorf("ParseID(%q) = %d, want not found", s, got)
		}
	}
}

func items(n int, q, p int64) []order.Item {
	out := make([]order.Item, n)
	for i := range out {
		out[i] = order.Item{SKU: "sku", Quantity: q, PriceCents: p}
	}
	return out
}

func TestValidate_BoundsAreInclusiveAndErrorsNameTheField(t *testing.T) {
	t.Parallel()
	ok := []struct {
		name  string
		in    order.NewOrder
		total int64
	}{
		{"one item", order.NewOrder{Currency: "CNY", Items: items(1, 1, 1)}, 1},
		{"50 items", order.NewOrder{Currency: "USD", Items: items(50, 1, 2)}, 100},
		{"total exactly 1e12", order.NewOrder{Currency: "JPY", Items: items(1, 1000, 1_000_000_000)}, 1_000_000_000_000},
		{"sku of 64 bytes, unicode", order.NewOrder{Currency: "EUR", Items: []order.Item{{SKU: strings.Repeat("é", 32), Quantity: 1, PriceCents: 1}}}, 1},
	}
	for _, tc := range ok {
		if total, err := tc.in.Validate(); err != nil || total != tc.total {
			t.Errorf("%s: total %d, %v; want %d", tc.name, total, err, tc.total)
		}
	}
	bad := []struct {
		name, detail string
		in           order.NewOrder
	}{
		{"no items", "items must hold 1 to 50 items; got 0.", order.NewOrder{Currency: "CNY"}},
		{"51 items", "items must hold 1 to 50 items; got 51.", order.NewOrder{Currency: "CNY", Items: items(51, 1, 1)}},
		{"quantity 0", "items[0].quantity must be 1 to 1000; got 0.", order.NewOrder{Currency: "CNY", Items: items(1, 0, 1)}},
		{"quantity 1001", "items[0].quantity must be 1 to 1000; got 1001.", order.NewOrder{Currency: "CNY", Items: items(1, 1001, 1)}},
		{"price 0", "items[0].price_cents must be 1 to 1000000000; got 0.", order.NewOrder{Currency: "CNY", Items: items(1, 1, 0)}},
		{"negative price", "items[0].price_cents must be 1 to 1000000000; got -1.", order.NewOrder{Currency: "CNY", Items: items(1, 1, -1)}},
		{"total over 1e12", "the order total (sum of quantity × price_cents) must be at most 1000000000000; got 2000000000000.",
			order.NewOrder{Currency: "CNY", Items: items(2, 1000, 1_000_000_000)}},
		{"currency lower-case", `currency must be an ISO 4217 code of three upper-case letters (e.g. CNY); got "cny".`, order.NewOrder{Currency: "cny", Items: items(1, 1, 1)}},
		{"currency too long", `currency must be an ISO 4217 code of three upper-case letters (e.g. CNY); got "CNYY".`, order.NewOrder{Currency: "CNYY", Items: items(1, 1, 1)}},
		{"empty sku", "items[0].sku must not be empty.", order.NewOrder{Currency: "CNY", Items: []order.Item{{Quantity: 1, PriceCents: 1}}}},
		{"sku 65 bytes", "items[0].sku must be at most 64 bytes; got 65.", order.NewOrder{Currency: "CNY", Items: []order.Item{{SKU: strings.Repeat("x", 65), Quantity: 1, PriceCents: 1}}}},
		{"sku not UTF-8", "items[0].sku must be valid UTF-8.", order.NewOrder{Currency: "CNY", Items: []order.Item{{SKU: "\xff", Quantity: 1, PriceCents: 1}}}},
		{"sku with newline", "items[0].sku must not contain control characters.", order.NewOrder{Currency: "CNY", Items: []order.Item{{SKU: "a\nb", Quantity: 1, PriceCents: 1}}}},
	}
	for _, tc := range bad {
		_, err := tc.in.Validate()
		if apperr.CodeOf(err) != apperr.InvalidRequest || !strings.Contains(err.Error(), tc.detail) {
			t.Errorf("%s: %v, want invalid_request %q", tc.name, err, tc.detail)
		}
	}
}

// The hash is stored on every order for ever and compared with replays: its
// encoding must never drift. A change here breaks every stored replay.
func TestBodyHash_IsFrozenAndSeparatesDifferentRequests(t *testing.T) {
	t.Parallel()
	in := order.NewOrder{Currency: "CNY", Items: []order.Item{{SKU: "apple", Quantity: 2, PriceCents: 350}, {SKU: "pear", Quantity: 1, PriceCents: 99}}}
	// sha256 of {"v":1,"currency":"CNY","items":[{"sku":"apple","quantity":2,"price_cents":350},{"sku":"pear","quantity":1,"price_cents":99}]}
	const golden = "a42f4da25594f929e2ddd454cc28f08995fe8d51bf8601f45d27bca9fa23d289"
	got := in.BodyHash()
	if got != golden {
		t.Fatalf("BodyHash = %s, want %s: the stored hashes of existing orders would no longer match", got, golden)
	}
	same := order.NewOrder{Currency: "CNY", Items: append([]order.Item(nil), in.Items...)}
	if same.BodyHash() != got {
		t.Error("equal requests hash differently")
	}
	for name, other := range map[string]order.NewOrder{
		"item order": {Currency: "CNY", Items: []order.Item{in.Items[1], in.Items[0]}},
		"currency":   {Currency: "USD", Items: in.Items},
		"quantity":   {Currency: "CNY", Items: []order.Item{{SKU: "apple", Quantity: 3, PriceCents: 350}, in.Items[1]}},
	} {
		if other.BodyHash() == got {
			t.Errorf("%s: a different request hashes equal", name)
		}
	}
}
