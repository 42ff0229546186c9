package httpapi_test

import (
	"net/http"
	"testing"
)

// The state machine's CAS: of 200 concurrent cancels exactly one changes
// the row (200), the rest find it no longer PENDING_PAYMENT (409), and the
// version moves by exactly one. (A load test: not parallel.)
func TestCancel_ConcurrentCancelsExactlyOneWins(t *testing.T) {
	e := newEnv(t, options{})
	o := e.create("alice", body1)
	const n = 200
	res := make([]resp, n)
	race(n, func(i int) { res[i] = e.do(http.MethodPost, "/v1/orders/"+o.ID+"/cancel", "alice", "") })
	ok := 0
	for _, r := range res {
		switch r.status {
		case http.StatusOK:
			ok++
			if c := decodeOrder(t, r); c.Status != "CANCELLED" || c.Version != o.Version+1 {
				t.Fatalf("the winning cancel answered %+v", c)
			}
		case http.StatusConflict:
			mustProblem(t, r, http.StatusConflict, "invalid_transition")
		default:
			t.Fatalf("unexpected answer %v", r)
		}
	}
	if ok != 1 {
		t.Fatalf("%d cancels answered 200, want exactly 1", ok)
	}
	var row struct {
		Status  string
		Version int64
	}
	if err := e.db.Table("orders").Select("status, version").Where("id = ?", o.ID).Take(&row).Error; err != nil {
		t.Fatal(err)
	}
	if row.Status != "CANCELLED" || row.Version != o.Version+1 {
		t.Fatalf("row is %+v, want CANCELLED at version %d", row, o.Version+1)
	}
}

func TestCancel_Contract(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	o := e.create("alice", body1)
	other := e.create("bob", body1)

	cases := []struct {
		name, user, id, body string
		status               int
		code                 string
	}{
		{"another user's order is not found", "alice", other.ID, "", 404, "not_found"},
		{"unparsable id is not found", "alice", "abc", "", 404, "not_found"},
		{"non-canonical id is not found", "alice", "0" + o.ID, "", 404, "not_found"},
		{"unknown id is not found", "alice", "999999999", "", 404, "not_found"},
		{"a body with fields is refused", "alice", o.ID, `{"reason":"x"}`, 400, "invalid_json"},
		{"no user is 401", "", o.ID, "", 401, "unauthenticated"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mustProblem(t, e.do(http.MethodPost, "/v1/orders/"+tc.id+"/cancel", tc.user, tc.body), tc.status, tc.code)
		})
	}
	r := e.do(http.MethodPost, "/v1/orders/"+o.ID+"/cancel", "alice", "{}")
	if r.status != http.StatusOK || decodeOrder(t, r).Status != "CANCELLED" {
		t.Fatalf("cancel with {}: %v", r)
	}
	p := mustProblem(t, e.do(http.MethodPost, "/v1/orders/"+o.ID+"/cancel", "alice", ""), 409, "invalid_transition")
	if p.Detail != "Order is CANCELLED; only a PENDING_PAYMENT order can be cancelled." {
		t.Errorf("detail %q", p.Detail)
	}
	// Bob's order was untouched by Alice's attempts.
	if g := decodeOrder(t, e.do(http.MethodGet, "/v1/orders/"+other.ID, "bob", "")); g.Status != "PENDING_PAYMENT" || g.Version != 1 {
		t.Fatalf("bob's order %+v", g)
	}
}
