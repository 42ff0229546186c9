package payment

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Headers of a gateway callback.
const (
	TimestampHeader = "X-Gateway-Timestamp" // unix seconds, decimal
	SignatureHeader = "X-Gateway-Signature" // hex HMAC-SHA256 over timestamp + "." + raw body
)

// MaxSkew is how far a callback's timestamp may be from our clock, either
// way. It bounds how long a captured callback can be replayed (a replay of
// a genuine one inside the window is absorbed as a duplicate anyway), and
// tolerates clock drift between the gateway and us.
const MaxSkew = 300 * time.Second

// Reasons Verify refuses a callback (all answered 401 unauthenticated).
var (
	// ErrUnsigned: a header is missing or malformed (a timestamp that is not
	// decimal seconds, a signature that is not 64 hex digits).
	ErrUnsigned = errors.New("payment: callback signature or timestamp missing or malformed")
	// ErrBadSignature: no configured key produces the signature over these
	// bytes — forged, altered after signing, or signed by a retired key.
	ErrBadSignature = errors.New("payment: callback signature does not verify")
	// ErrStale: the signature verifies but the timestamp is more than MaxSkew
	// away from our clock (a replay, or a badly skewed gateway clock).
	ErrStale = errors.New("payment: callback timestamp outside the accepted window")
)

// Verifier checks gateway callbacks against the configured keys
// (PAYMENT_GATEWAY_SECRET): any key verifies, so a key can be rotated by
// adding the new one first, switching the gateway, then removing the old.
type Verifier struct {
	keys [][]byte
	now  func() time.Time
}

// NewVerifier returns a Verifier for secrets (at least one, none empty). now
// is the clock the window is measured on (nil: time.Now).
func NewVerifier(secrets []string, now func() time.Time) (*Verifier, error) {
	if len(secrets) == 0 {
		return nil, errors.New("payment: PAYMENT_GATEWAY_SECRET: at least one key is required")
	}
	v := &Verifier{now: now}
	if v.now == nil {
		v.now = time.Now
	}
	for i, s := range secrets {
		if s == "" {
			return nil, fmt.Errorf("payment: PAYMENT_GATEWAY_SECRET: key %d is empty", i+1)
		}
		v.keys = append(v.keys, []byte(s))
	}
	return v, nil
}

// Verify checks a callback before anything in it is parsed: the signature
// over exactly the received bytes (timestamp header + "." + body), compared
// with hmac.Equal against every key, then the timestamp's window. It returns
// nil, or an error wrapping ErrUnsigned, ErrBadSignature or ErrStale.
//
// The signature is checked before the window so that ErrStale always means
// "genuine but late": an unauthenticated caller learns nothing about our
// clock.
func (v *Verifier) Verify(timestamp, signature string, body []byte) error {
	ts, ok := parseTimestamp(timestamp)
	if !ok {
		return fmt.Errorf("%w: %s", ErrUnsigned, TimestampHeader)
	}
	got, err := hex.DecodeString(signature)
	if err != nil || len(got) != sha256.Size {
		return fmt.Errorf("%w: %s", ErrUnsigned, SignatureHeader)
	}
	match := false
	for _, k := range v.keys { // no early exit: every key costs the same
		if hmac.Equal(got, mac(k, timestamp, body)) {
			match = true
		}
	}
	if !match {
		return ErrBadSignature
	}
	skew := v.now().Unix() - ts
	if skew > int64(MaxSkew/time.Second) || skew < -int64(MaxSkew/time.Second) {
		return fmt.Errorf("%w: %d s off", ErrStale, skew)
	}
	return nil
}

// Sign returns the signature a gateway sends for body at timestamp (unix
// seconds, as sent in TimestampHeader) with secret. The simulator signs with
// the first configured key.
func Sign(secret string, timestamp string, body []byte) string {
	return hex.EncodeToString(mac([]byte(secret), timestamp, body))
}

func mac(key []byte, timestamp string, body []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(timestamp))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

// parseTimestamp accepts 1–12 decimal digits only: no sign, spaces or
// exponent, so one instant has one signed spelling.
func parseTimestamp(s string) (int64, bool) {
	if len(s) == 0 || len(s) > 12 {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}
