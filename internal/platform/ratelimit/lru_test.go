package ratelimit

import (
	"context"
	"fmt"
	"testing"
)

func TestLRU_StaysBoundedAndEvictsTheLeastRecentlyUsed(t *testing.T) {
	t.Parallel()
	c := newLRU[int](3)
	mk := func(v int) func() int { return func() int { return v } }
	c.getOrAdd("a", mk(1))
	c.getOrAdd("b", mk(2))
	c.getOrAdd("c", mk(3))
	if got := c.getOrAdd("a", mk(99)); got != 1 { // a is now the most recent
		t.Fatalf("existing a = %d, want 1 (kept, not replaced)", got)
	}
	c.getOrAdd("d", mk(4)) // evicts b, the least recently used
	if c.len() != 3 {
		t.Fatalf("len %d, want 3", c.len())
	}
	if _, ok := c.get("b"); ok {
		t.Fatal("b survived; it was the least recently used")
	}
	for _, k := range []string{"a", "c", "d"} {
		if _, ok := c.get(k); !ok {
			t.Fatalf("%s was evicted, want b evicted", k)
		}
	}
	for i := range 1000 {
		c.getOrAdd(fmt.Sprint(i), mk(i))
	}
	if c.len() != 3 || len(c.items) != 3 {
		t.Fatalf("len %d, map %d after 1000 adds, want 3", c.len(), len(c.items))
	}
}

func TestAllow_FallbackRemembersAtMostFallbackUsers(t *testing.T) {
	t.Parallel()
	rdb, _ := countedClient(t, closedAddr(t))
	l, _ := newLimiter(t, rdb, Config{FallbackUsers: 3, Now: newFakeClock().Now})
	for i := range 10 {
		l.Allow(context.Background(), fmt.Sprint("user-", i))
	}
	if got := l.local.users.len(); got != 3 {
		t.Fatalf("fallback holds %d users, want FallbackUsers = 3", got)
	}
}
