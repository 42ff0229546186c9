package ratelimit

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func newTestBreaker(clock *fakeClock) (*breaker, *[]string) {
	var log []string
	b := &breaker{now: clock.Now, threshold: 3, coolDown: time.Second,
		onTransition: func(to breakerState) { log = append(log, to.String()) }}
	return b, &log
}

// call runs one request through b with the given outcome, if b lets it call.
func call(b *breaker, o outcome) (called, probe bool) {
	called, probe = b.enter()
	if called {
		b.leave(probe, o)
	}
	return called, probe
}

func TestBreaker_OpensOnlyAfterThresholdConsecutiveFailures(t *testing.T) {
	t.Parallel()
	b, _ := newTestBreaker(newFakeClock())
	for _, o := range []outcome{failure, failure, success, failure, failure} {
		call(b, o)
	}
	if s, degraded := b.current(); s != closed || !degraded {
		t.Fatalf("state %v degraded %v after 2 failures, a success and 2 failures; want closed and degraded", s, degraded)
	}
	call(b, failure)
	if s, _ := b.current(); s != open {
		t.Fatalf("state %v after 3 consecutive failures, want open", s)
	}
	if called, _ := b.enter(); called {
		t.Fatal("an open breaker let a request call Redis")
	}
}

func TestBreaker_OneProbeAfterCoolDownDecides(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	b, log := newTestBreaker(clock)
	for range 3 {
		call(b, failure)
	}
	clock.Advance(time.Second - time.Nanosecond)
	if called, _ := b.enter(); called {
		t.Fatal("called Redis before the cool-down ended")
	}
	clock.Advance(time.Nanosecond)
	if called, probe := b.enter(); !called || !probe {
		t.Fatalf("after the cool-down: called %v probe %v, want the probe", called, probe)
	}
	if called, _ := b.enter(); called {
		t.Fatal("a second request called Redis while the probe was out")
	}
	b.leave(true, failure) // the failed probe re-opens for a whole cool-down
	clock.Advance(time.Second - time.Nanosecond)
	if called, _ := b.enter(); called {
		t.Fatal("called Redis within the cool-down after a failed probe")
	}
	clock.Advance(time.Nanosecond)
	if called, probe := call(b, success); !called || !probe {
		t.Fatal("no second probe after the second cool-down")
	}
	if called, probe := b.enter(); !called || probe {
		t.Fatalf("after a good probe: called %v probe %v, want closed (every request calls)", called, probe)
	}
	b.leave(false, success)
	if _, degraded := b.current(); degraded {
		t.Fatal("still degraded after the breaker closed")
	}
	want := []string{"open", "half_open", "open", "half_open", "closed"}
	if len(*log) != len(want) {
		t.Fatalf("transitions %v, want %v", *log, want)
	}
	for i := range want {
		if (*log)[i] != want[i] {
			t.Fatalf("transitions %v, want %v", *log, want)
		}
	}
}

func TestBreaker_AbandonedProbeFreesTheSlotWithoutDeciding(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	b, _ := newTestBreaker(clock)
	for range 3 {
		call(b, failure)
	}
	clock.Advance(time.Second)
	call(b, abandoned)
	if called, probe := b.enter(); !called || !probe {
		t.Fatalf("after an abandoned probe: called %v probe %v, want another probe at once", called, probe)
	}
}

func TestBreaker_StragglerSuccessDoesNotCloseAnOpenBreaker(t *testing.T) {
	t.Parallel()
	b, _ := newTestBreaker(newFakeClock())
	_, straggler := b.enter() // started while closed, answers late
	for range 3 {
		call(b, failure)
	}
	b.leave(straggler, success)
	if s, _ := b.current(); s != open {
		t.Fatalf("state %v, want open: only the probe may close the breaker", s)
	}
}

func TestBreaker_ConcurrentRequestsAfterCoolDownSendExactlyOneProbe(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	b, _ := newTestBreaker(clock)
	for range 3 {
		call(b, failure)
	}
	clock.Advance(time.Second)
	var calls, probes atomic.Int64
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if called, probe := b.enter(); called {
				calls.Add(1)
				if probe {
					probes.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if calls.Load() != 1 || probes.Load() != 1 {
		t.Fatalf("%d calls, %d probes from 50 concurrent requests, want exactly 1 probe", calls.Load(), probes.Load())
	}
}
