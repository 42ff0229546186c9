package payment_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/onceonly/onceonly/internal/payment"
)

// The state machine is exactly DESIGN.md's: PENDING → SUCCEEDED → REFUNDED,
// PENDING → FAILED; nothing else.
func TestCanTransition_OnlyTheDesignedEdges(t *testing.T) {
	t.Parallel()
	allowed := map[[2]payment.Status]bool{
		{payment.Pending, payment.Succeeded}:  true,
		{payment.Pending, payment.Failed}:     true,
		{payment.Succeeded, payment.Refunded}: true,
	}
	for _, from := range payment.Statuses {
		for _, to := range payment.Statuses {
			if got := payment.CanTransition(from, to); got != allowed[[2]payment.Status{from, to}] {
				t.Errorf("CanTransition(%s, %s) = %v", from, to, got)
			}
		}
	}
}

// A late callback agrees with a payment when it reports the outcome the
// payment already has (a refund happened after a success).
func TestStatusReports_SucceededAgreesWithRefunded(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		have, got payment.Status
		want      bool
	}{
		{payment.Succeeded, payment.Succeeded, true},
		{payment.Refunded, payment.Succeeded, true},
		{payment.Failed, payment.Failed, true},
		{payment.Succeeded, payment.Failed, false},
		{payment.Refunded, payment.Failed, false},
		{payment.Failed, payment.Succeeded, false},
		{payment.Pending, payment.Succeeded, false},
	} {
		if got := c.have.Reports(c.got); got != c.want {
			t.Errorf("%s.Reports(%s) = %v", c.have, c.got, got)
		}
	}
}

func TestParseID_OnlyTheCanonicalFormParses(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]int64{"1": 1, "42": 42, "9223372036854775807": 9223372036854775807} {
		if got, ok := payment.ParseID(s); !ok || got != want {
			t.Errorf("ParseID(%q) = %d, %v", s, got, ok)
		}
	}
	for _, s := range []string{"", "0", "01", "+1", "-1", " 1", "1 ", "1e3", "0x1", "9223372036854775808", "abc"} {
		if _, ok := payment.ParseID(s); ok {
			t.Errorf("ParseID(%q) parsed", s)
		}
	}
}

func TestVerifier_SignatureThenWindow(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_750_000_000, 0)
	v, err := payment.NewVerifier([]string{"new", "old"}, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"payment_id":"1"}`)
	at := func(d time.Duration) string { return strconv.FormatInt(now.Add(d).Unix(), 10) }
	ts := at(0)
	for _, c := range []struct {
		name, ts, sig string
		body          []byte
		want          error
	}{
		{"first key", ts, payment.Sign("new", ts, body), body, nil},
		{"second key", ts, payment.Sign("old", ts, body), body, nil},
		{"upper-case hex", ts, strings.ToUpper(payment.Sign("new", ts, body)), body, nil},
		{"300 s old", at(-300 * time.Second), payment.Sign("new", at(-300*time.Second), body), body, nil},
		{"300 s ahead", at(300 * time.Second), payment.Sign("new", at(300*time.Second), body), body, nil},
		{"301 s old", at(-301 * time.Second), payment.Sign("new", at(-301*time.Second), body), body, payment.ErrStale},
		{"301 s ahead", at(301 * time.Second), payment.Sign("new", at(301*time.Second), body), body, payment.ErrStale},
		{"unknown key", ts, payment.Sign("other", ts, body), body, payment.ErrBadSignature},
		{"unknown key and stale", at(-301 * time.Second), payment.Sign("other", at(-301*time.Second), body), body, payment.ErrBadSignature},
		{"body altered", ts, payment.Sign("new", ts, body), []byte(`{"payment_id":"2"}`), payment.ErrBadSignature},
		{"body empty", ts, payment.Sign("new", ts, body), nil, payment.ErrBadSignature},
		{"timestamp missing", "", payment.Sign("new", "", body), body, payment.ErrUnsigned},
		{"timestamp signed with a sign", "+" + ts, payment.Sign("new", "+"+ts, body), body, payment.ErrUnsigned},
		{"timestamp in milliseconds", ts + "000", payment.Sign("new", ts+"000", body), body, payment.ErrUnsigned},
		{"signature missing", ts, "", body, payment.ErrUnsigned},
		{"signature short", ts, payment.Sign("new", ts, body)[:63], body, payment.ErrUnsigned},
		{"signature long", ts, payment.Sign("new", ts, body) + "00", body, payment.ErrUnsigned},
		{"signature base64", ts, "q83vEjRWeJq83vEjRWeJq83vEjRWeJq83vEjRWeJq80=", body, payment.ErrUnsigned},
	} {
		err := v.Verify(c.ts, c.sig, c.body)
		if (c.want == nil) != (err == nil) || (c.want != nil && !errors.Is(err, c.want)) {
			t.Errorf("%s: Verify = %v, want %v", c.name, err, c.want)
		}
	}
}

func TestNewVerifier_RefusesNoKeyOrAnEmptyOne(t *testing.T) {
	t.Parallel()
	for _, keys := range [][]string{nil, {}, {""}, {"a", ""}} {
		if _, err := payment.NewVerifier(keys, nil); err == nil || !strings.Contains(err.Error(), "PAYMENT_GATEWAY_SECRET") {
			t.Errorf("NewVerifier(%q) = %v, want an error naming PAYMENT_GATEWAY_SECRET", keys, err)
		}
	}
}
