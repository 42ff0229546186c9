package idempotency

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// BodyHash returns the SHA-256 (lower-case hex) of the canonical JSON
// encoding of v, the caller's decoded and normalised request.
//
// Hashing the decoded value, not the raw body, is what makes it canonical:
// whitespace, key order and escapes in the client's JSON are gone after
// decoding; struct fields encode in declaration order and map keys sorted, so
// equal values give equal bytes. Normalise before hashing (e.g. upper-case the
// currency) so that requests the service treats as equal hash equal. Changing
// the request struct (a field renamed or added) changes every hash: tokens
// live 30 minutes, but a body hash stored on an order row lives for ever, so
// keep the hashed struct stable or version it.
//
// v must encode with encoding/json; a value that cannot (a channel, a func,
// a cycle) is a programming error and panics.
func BodyHash(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("idempotency: BodyHash(%T): %v", v, err))
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
