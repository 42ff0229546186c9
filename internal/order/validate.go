package order

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/onceonly/onceonly/internal/platform/apperr"
	"github.com/onceonly/onceonly/internal/platform/idempotency"
	"github.com/onceonly/onceonly/internal/platform/ids"
)

// Bounds of a submitted order (DESIGN.md, "order service"). The total bound
// keeps every sum far from int64 overflow: 50 × 1000 × 1e9 = 5e13.
const (
	MinItems      = 1
	MaxItems      = 50
	MinQuantity   = 1
	MaxQuantity   = 1000
	MinPriceCents = 1
	MaxPriceCents = 1_000_000_000
	MaxTotalCents = 1_000_000_000_000
	MaxSKULen     = 64 // bytes
)

// NewOrder is what a client submits: the server computes the amount.
type NewOrder struct {
	Currency string
	Items    []Item
}

// Validate checks every bound and returns the order's total in minor units.
// The error is a 400 invalid_request *apperr.Error whose detail names the
// first offending field and value (items[3].quantity, currency, ...).
func (n NewOrder) Validate() (int64, error) {
	if !ids.IsCurrency(n.Currency) {
		return 0, invalid("currency must be an ISO 4217 code of three upper-case letters (e.g. CNY); got %q.", clip(n.Currency, 16))
	}
	if len(n.Items) < MinItems || len(n.Items) > MaxItems {
		return 0, invalid("items must hold %d to %d items; got %d.", MinItems, MaxItems, len(n.Items))
	}
	var total int64
	for i, it := range n.Items {
		if err := checkSKU(i, it.SKU); err != nil {
			return 0, err
		}
		if it.Quantity < MinQuantity || it.Quantity > MaxQuantity {
			return 0, invalid("items[%d].quantity must be %d to %d; got %d.", i, MinQuantity, MaxQuantity, it.Quantity)
		}
		if it.PriceCents < MinPriceCents || it.PriceCents > MaxPriceCents {
			return 0, invalid("items[%d].price_cents must be %d to %d; got %d.", i, MinPriceCents, MaxPriceCents, it.PriceCents)
		}
		// Bounded above: each line ≤ 1e12, at most 50 lines.
		total += it.Quantity * it.PriceCents
	}
	if total > MaxTotalCents {
		return 0, invalid("the order total (sum of quantity × price_cents) must be at most %d; got %d.", int64(MaxTotalCents), total)
	}
	return total, nil
}

func checkSKU(i int, sku string) error {
	switch {
	case strings.TrimSpace(sku) == "":
		return invalid("items[%d].sku must not be empty.", i)
	case len(sku) > MaxSKULen:
		return invalid("items[%d].sku must be at most %d bytes; got %d.", i, MaxSKULen, len(sku))
	case !utf8.ValidString(sku):
		return invalid("items[%d].sku must be valid UTF-8.", i)
	case strings.IndexFunc(sku, unicode.IsControl) >= 0:
		return invalid("items[%d].sku must not contain control characters.", i)
	}
	return nil
}

func invalid(format string, args ...any) error {
	return apperr.New(apperr.InvalidRequest, format, args...)
}

// canonicalBody is the hashed form of a NewOrder. Its encoding is frozen:
// the hash is stored on every order row for ever and compared with the hash
// of a replayed request, so a changed field name or order would turn every
// old replay into a 422. Change the shape only together with V.
type canonicalBody struct {
	V        int             `json:"v"`
	Currency string          `json:"currency"`
	Items    []canonicalItem `json:"items"`
}

type canonicalItem struct {
	SKU        string `json:"sku"`
	Quantity   int64  `json:"quantity"`
	PriceCents int64  `json:"price_cents"`
}

// BodyHash is the hash that binds a submit token to its request: equal for
// requests the service treats as equal (whatever their JSON spelling:
// whitespace, key order, escapes), different otherwise. Item order counts.
func (n NewOrder) BodyHash() string {
	b := canonicalBody{V: 1, Currency: n.Currency, Items: make([]canonicalItem, len(n.Items))}
	for i, it := range n.Items {
		b.Items[i] = canonicalItem(it)
	}
	return idempotency.BodyHash(b)
}
