package testkit_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/onceonly/onceonly/internal/platform/testkit"
)

func TestProxy_CutRefusesAndRestoreReconnects(t *testing.T) {
	t.Parallel()
	rdb, _ := testkit.Redis(t)
	px := testkit.NewProxy(t, rdb.Options().Addr)
	c := redis.NewClient(&redis.Options{Addr: px.Addr, MaxRetries: -1, DialTimeout: 500 * time.Millisecond})
	defer c.Close()
	ctx := context.Background()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("through the proxy: %v", err)
	}
	px.Cut()
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("ping succeeded through a cut proxy")
	}
	px.Restore()
	deadline := time.Now().Add(5 * time.Second)
	for c.Ping(ctx).Err() != nil {
		if time.Now().After(deadline) {
			t.Fatal("no reconnect after Restore")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
