package ratelimit

import "container/list"

// lru is a map bounded to cap entries that forgets the least recently used
// one first. It is not safe for concurrent use; the fallback locks around it.
type lru[V any] struct {
	cap   int
	order *list.List // front = most recently used; elements hold *lruEntry[V]
	items map[string]*list.Element
}

type lruEntry[V any] struct {
	key   string
	value V
}

func newLRU[V any](capacity int) *lru[V] {
	return &lru[V]{cap: capacity, order: list.New(), items: make(map[string]*list.Element, capacity)}
}

// getOrAdd returns key's value, marking it most recently used, or stores and
// returns mk() — evicting the least recently used entry when full.
func (c *lru[V]) getOrAdd(key string, mk func() V) V {
	if e, ok := c.items[key]; ok {
		c.order.MoveToFront(e)
		return e.Value.(*lruEntry[V]).value
	}
	if c.order.Len() >= c.cap {
		oldest := c.order.Back()
		c.order.Remove(oldest)
		delete(c.items, oldest.Value.(*lruEntry[V]).key)
	}
	v := mk()
	c.items[key] = c.order.PushFront(&lruEntry[V]{key: key, value: v})
	return v
}

// get returns key's value without changing its recency.
func (c *lru[V]) get(key string) (V, bool) {
	if e, ok := c.items[key]; ok {
		return e.Value.(*lruEntry[V]).value, true
	}
	var zero V
	return zero, false
}

func (c *lru[V]) len() int { return c.order.Len() }
