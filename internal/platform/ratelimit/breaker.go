package ratelimit

import (
	"sync"
	"time"
)

// breakerState is the circuit breaker's position.
type breakerState int

const (
	// closed: every request asks Redis.
	closed breakerState = iota
	// open: no request asks Redis until the cool-down has passed.
	open
	// halfOpen: one probe is asking Redis; every other request stays off it.
	halfOpen
)

func (s breakerState) String() string {
	switch s {
	case closed:
		return "closed"
	case open:
		return "open"
	default:
		return "half_open"
	}
}

// outcome is how a Redis call ended, as the breaker sees it.
type outcome int

const (
	success outcome = iota
	failure
	// abandoned: the caller went away (its context ended) before Redis
	// answered. That says nothing about Redis, so it neither opens nor closes
	// the breaker; an abandoned probe only frees the probe slot.
	abandoned
)

// breaker keeps requests off a Redis that is failing. Without it every
// request would wait the full timeout on a dead Redis before falling back,
// adding the timeout to each request's latency and piling up calls.
type breaker struct {
	now       func() time.Time
	threshold int
	coolDown  time.Duration
	// onTransition and onDegraded are called with mu held, so metric updates
	// stay in the order of the transitions.
	onTransition func(to breakerState)
	onDegraded   func(degraded bool)

	mu       sync.Mutex
	state    breakerState
	failures int // consecutive, while closed
	openedAt time.Time
	degraded bool // the last Redis call failed, or the breaker is not closed
}

// enter reports whether this request may call Redis and, if so, whether it is
// the half-open probe (whose outcome alone decides open or closed).
func (b *breaker) enter() (call, probe bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state {
	case closed:
		return true, false
	case open:
		if b.now().Sub(b.openedAt) < b.coolDown {
			return false, false
		}
		b.setState(halfOpen)
		return true, true
	default: // halfOpen: a probe is out; one at a time.
		return false, false
	}
}

// leave records the outcome of a call that enter allowed.
func (b *breaker) leave(probe bool, o outcome) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case probe && o == success:
		b.failures = 0
		b.setState(closed)
	case probe && o == failure:
		b.trip()
	case probe: // abandoned: let the next request probe at once.
		b.setState(open)
	case b.state != closed:
		// A call that started before the breaker opened: only the probe
		// decides, or a slow straggler could close a breaker that just opened.
	case o == success:
		b.failures = 0
	case o == failure:
		b.failures++
		if b.failures >= b.threshold {
			b.trip()
		}
	}
	b.setDegraded(b.state != closed || b.failures > 0)
}

func (b *breaker) trip() {
	b.openedAt = b.now()
	b.setState(open)
}

func (b *breaker) setState(s breakerState) {
	if s == b.state {
		return
	}
	b.state = s
	if b.onTransition != nil {
		b.onTransition(s)
	}
}

func (b *breaker) setDegraded(d bool) {
	if d == b.degraded {
		return
	}
	b.degraded = d
	if b.onDegraded != nil {
		b.onDegraded(d)
	}
}

// current returns the state and the degraded flag, for tests and metrics.
func (b *breaker) current() (breakerState, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state, b.degraded
}
