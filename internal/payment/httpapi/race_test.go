package httpapi_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/onceonly/onceonly/internal/payment"
)

// barrierStore holds the first n Gets until all n have read, so n callbacks
// all see the payment PENDING and all race to the conditional UPDATE — the
// case the read alone cannot settle.
type barrierStore struct {
	payment.Store
	mu      sync.Mutex
	n       int
	arrived chan struct{}
	all     chan struct{}
}

func (s *barrierStore) Get(ctx context.Context, id int64) (payment.Payment, error) {
	p, err := s.Store.Get(ctx, id)
	s.mu.Lock()
	wait := s.n > 0
	if wait {
		s.n--
		if s.n == 0 {
			close(s.all)
		}
	}
	s.mu.Unlock()
	if wait {
		select {
		case <-s.all:
		case <-time.After(10 * time.Second):
		}
	}
	return p, err
}

// When every callback read PENDING, the UPDATE decides: one transition, one
// event; the losers read again and answer "duplicate" (counted as CAS
// conflicts), never a second event.
func TestCallback_CallbacksThatAllReadPendingLoseTheUpdateAndAnswerDuplicate(t *testing.T) {
	t.Parallel()
	const n = 20
	bs := &barrierStore{n: n, all: make(chan struct{})}
	e := newEnv(t, options{wrap: func(s payment.Store) payment.Store { bs.Store = s; return bs }})
	p := e.create("o-1", 800, "CNY")
	body := cbBody(p, "SUCCEEDED", "txn-1")
	got := make([]resp, n)
	race(n, func(i int) { got[i] = e.callback(body) })
	results := map[string]int{}
	for _, r := range got {
		if r.status != http.StatusOK {
			t.Fatalf("callback answered %v", r)
		}
		results[string(r.body)]++
	}
	if results[`{"result":"processed"}`] != 1 || results[`{"result":"duplicate"}`] != n-1 {
		t.Fatalf("results %v", results)
	}
	if c := e.metric("onceonly_payment_cas_conflicts_total", "to", "SUCCEEDED"); c != n-1 {
		t.Fatalf("cas_conflicts_total{to=SUCCEEDED} = %v, want %d: the losers did not reach the UPDATE", c, n-1)
	}
	if r := e.row(p.ID); r.Status != "SUCCEEDED" || r.Version != 2 {
		t.Fatalf("row %+v", r)
	}
	if rows := e.count("outbox_events", ""); rows != 1 {
		t.Fatalf("%d outbox rows, want 1", rows)
	}
}
