package order_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/onceonly/onceonly/internal/order"
	"github.com/onceonly/onceonly/internal/platform/apperr"
	"github.com/onceonly/onceonly/internal/platform/idempotency"
)

// fakeTokens answers Claim with a fixed result and records what the service
// did with its claim.
type fakeTokens struct {
	claim              idempotency.Claim
	claimErr           error
	finishErr          error
	finished, released []string // order ids finished; leases released
}

func (f *fakeTokens) Issue(context.Context, string) (idempotency.Token, error) {
	return idempotency.Token{}, errors.New("not used")
}

func (f *fakeTokens) Claim(context.Context, string, string, string) (idempotency.Claim, error) {
	return f.claim, f.claimErr
}

func (f *fakeTokens) Finish(_ context.Context, _, _, id string) error {
	f.finished = append(f.finished, id)
	return f.finishErr
}

func (f *fakeTokens) Release(_ context.Context, _, lease string) error {
	f.released = append(f.released, lease)
	return nil
}

// fakeStore holds at most one order, looked up by token.
type fakeStore struct {
	order.Store // other methods are not used here
	existing    *order.Order
	createErr   error
	creates     int
}

func (s *fakeStore) Create(_ context.Context, o *order.Order) error {
	s.creates++
	if s.createErr != nil {
		return s.createErr
	}
	if s.existing != nil {
		return order.ErrDuplicateSubmit
	}
	o.ID = 7
	s.existing = o
	return nil
}

func (s *fakeStore) BySubmitToken(_ context.Context, user, token string) (order.Order, error) {
	if s.existing == nil || s.existing.UserID != user || s.existing.SubmitToken != token {
		return order.Order{}, order.ErrNotFound
	}
	return *s.existing, nil
}

const key = "TOKENABCDEFGHIJKLMNOPQRSTU"

var good = order.NewOrder{Currency: "CNY", Items: []order.Item{{SKU: "apple", Quantity: 2, PriceCents: 350}}}

func newService(t *testing.T, st *fakeStore, tk *fakeTokens) (*order.Service, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	svc, err := order.NewService(st, tk, order.Config{Lease: 30 * time.Second, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	return svc, reg
}

func stored(hash string) *order.Order {
	return &order.Order{ID: 3, UserID: "alice", SubmitToken: key, BodyHash: hash, Status: order.PendingPayment}
}

func TestSubmit_ProtocolBranches(t *testing.T) {
	t.Parallel()
	redisDown := apperr.Wrap(errors.New("dial tcp: connection refused"), apperr.DependencyUnavailable, "x")
	cases := []struct {
		name         string
		claim        idempotency.Claim
		claimErr     error
		existing     *order.Order
		createErr    error
		finishErr    error
		wantCode     apperr.Code // "" = success
		wantReplayed bool
		wantCreates  int
		wantFinished []string
		wantReleased int
		outcome      string
	}{
		{name: "Redis down: 503 and no insert, even for a key the database knows",
			claimErr: redisDown, existing: stored(good.BodyHash()), wantCode: apperr.DependencyUnavailable, outcome: order.OutcomeUnavailable},
		{name: "Redis answers garbage: still fail closed",
			claimErr: errors.New("idempotency: claim: unexpected reply"), wantCode: apperr.DependencyUnavailable, outcome: order.OutcomeUnavailable},
		{name: "claimed: insert, finish, 201",
			claim: idempotency.Claim{Outcome: idempotency.Claimed, LeaseID: "L"}, wantCreates: 1, wantFinished: []string{"7"}, outcome: order.OutcomeCreated},
		{name: "claimed, finish fails: the order stands, 201",
			claim: idempotency.Claim{Outcome: idempotency.Claimed, LeaseID: "L"}, finishErr: idempotency.ErrLeaseLost,
			wantCreates: 1, wantFinished: []string{"7"}, outcome: order.OutcomeCreated},
		{name: "claimed, unique index says an earlier attempt won with this body: 200 and finish with its id",
			claim: idempotency.Claim{Outcome: idempotency.Claimed, LeaseID: "L", Reclaimed: true}, existing: stored(good.BodyHash()),
			wantReplayed: true, wantCreates: 1, wantFinished: []string{"3"}, outcome: order.OutcomeReplayed},
		{name: "claimed, earlier attempt won with another body: 422 and release, never finish",
			claim: idempotency.Claim{Outcome: idempotency.Claimed, LeaseID: "L"}, existing: stored("other"),
			wantCode: apperr.IdempotencyKeyReused, wantCreates: 1, wantReleased: 1, outcome: order.OutcomeReused},
		{name: "claimed, insert fails: 503 and release for an immediate retry",
			claim: idempotency.Claim{Outcome: idempotency.Claimed, LeaseID: "L"}, createErr: errors.New("connection reset"),
			wantCode: apperr.DependencyUnavailable, wantCreates: 1, wantReleased: 1, outcome: order.OutcomeUnavailable},
		{name: "in use: 409, no insert",
			claim: idempotency.Claim{Outcome: idempotency.InUse}, wantCode: apperr.IdempotencyKeyInUse, outcome: order.OutcomeInUse},
		{name: "reused: 422, no insert",
			claim: idempotency.Claim{Outcome: idempotency.Reused}, wantCode: apperr.IdempotencyKeyReused, outcome: order.OutcomeReused},
		{name: "done: replay from the database",
			claim: idempotency.Claim{Outcome: idempotency.Done, OrderID: "3"}, existing: stored(good.BodyHash()),
			wantReplayed: true, outcome: order.OutcomeReplayed},
		{name: "done but no row has the token: 500, never a second order",
			claim: idempotency.Claim{Outcome: idempotency.Done, OrderID: "3"}, wantCode: apperr.Internal, outcome: order.OutcomeError},
		{name: "invalid in Redis, the database has it with this body: replay",
			claim: idempotency.Claim{Outcome: idempotency.Invalid}, existing: stored(good.BodyHash()), wantReplayed: true, outcome: order.OutcomeReplayed},
		{name: "invalid in Redis, the database has it with another body: 422",
			claim: idempotency.Claim{Outcome: idempotency.Invalid}, existing: stored("other"), wantCode: apperr.IdempotencyKeyReused, outcome: order.OutcomeReused},
		{name: "invalid everywhere: 400",
			claim: idempotency.Claim{Outcome: idempotency.Invalid}, wantCode: apperr.IdempotencyKeyInvalid, outcome: order.OutcomeInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st := &fakeStore{existing: tc.existing, createErr: tc.createErr}
			tk := &fakeTokens{claim: tc.claim, claimErr: tc.claimErr, finishErr: tc.finishErr}
			svc, reg := newService(t, st, tk)
			o, replayed, err := svc.Submit(context.Background(), "alice", key, good)
			if tc.wantCode == "" && err != nil || tc.wantCode != "" && apperr.CodeOf(err) != tc.wantCode {
				t.Fatalf("err %v (code %s), want code %q", err, apperr.CodeOf(err), tc.wantCode)
			}
			if err == nil && (o.ID == 0 || replayed != tc.wantReplayed) {
				t.Fatalf("order %d, replayed %v; want replayed %v", o.ID, replayed, tc.wantReplayed)
			}
			if st.creates != tc.wantCreates || len(tk.released) != tc.wantReleased || len(tk.finished) != len(tc.wantFinished) {
				t.Fatalf("creates %d, released %d, finished %v; want %d, %d, %v",
					st.creates, len(tk.released), tk.finished, tc.wantCreates, tc.wantReleased, tc.wantFinished)
			}
			for i := range tk.finished {
				if tk.finished[i] != tc.wantFinished[i] {
					t.Fatalf("finished with %v, want %v", tk.finished, tc.wantFinished)
				}
			}
			if n := outcomeCount(t, reg, tc.outcome); n != 1 {
				t.Errorf("submits_total{outcome=%s} = %v, want 1", tc.outcome, n)
			}
		})
	}
}

func TestSubmit_RefusedBodyAndMissingKeyNeverTouchRedis(t *testing.T) {
	t.Parallel()
	tk := &fakeTokens{claimErr: errors.New("Claim must not be called")}
	svc, _ := newService(t, &fakeStore{}, tk)
	if _, _, err := svc.Submit(context.Background(), "alice", "", good); apperr.CodeOf(err) != apperr.IdempotencyKeyMissing {
		t.Fatalf("no key: %v", err)
	}
	if _, _, err := svc.Submit(context.Background(), "alice", key, order.NewOrder{Currency: "CNY"}); apperr.CodeOf(err) != apperr.InvalidRequest {
		t.Fatalf("no items: %v", err)
	}
}

func outcomeCount(t *testing.T, reg *prometheus.Registry, outcome string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "onceonly_order_submits_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == outcome {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no submits_total{outcome=%s}", outcome)
	return 0
}
