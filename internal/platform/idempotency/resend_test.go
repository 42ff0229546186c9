package idempotency

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// resendHook runs every script twice and hands the caller the second reply:
// what a client sees when its first attempt ran on the server but the reply
// came too late and go-redis sent the command again.
type resendHook struct{}

func (resendHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (resendHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (resendHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if name := strings.ToLower(cmd.Name()); name == "evalsha" || name == "eval" {
			if err := next(ctx, cmd); err != nil {
				return err
			}
		}
		return next(ctx, cmd)
	}
}

func TestStore_ScriptsResentAfterALateReplyAnswerAsTheFirstRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{})
	opts := *e.rdb.Options()
	resending := redis.NewClient(&opts)
	resending.AddHook(resendHook{})
	t.Cleanup(func() { resending.Close() })
	s, err := New(resending, e.s.cfg, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	tok, err := s.Issue(ctx, "alice")
	if err != nil {
		t.Fatalf("re-sent Issue must succeed, not report a collision: %v", err)
	}
	var unused int64
	if unused, err = e.rdb.ZCard(ctx, s.indexKey("alice")).Result(); err != nil || unused != 1 {
		t.Fatalf("unused tokens after one re-sent Issue = %d (%v), want 1", unused, err)
	}
	c, err := s.Claim(ctx, "alice", tok.Value, "h1")
	if err != nil || c.Outcome != Claimed {
		t.Fatalf("re-sent Claim = %v, %v; want Claimed (the client would otherwise get 409 for its own key)", c.Outcome, err)
	}
	if err := s.Finish(ctx, tok.Value, c.LeaseID, "42"); err != nil {
		t.Fatalf("re-sent Finish: %v", err)
	}
	// A genuinely different attempt is still kept out.
	other, err := e.s.Claim(ctx, "alice", tok.Value, "h1")
	if err != nil || other.Outcome != Done || other.OrderID != "42" {
		t.Fatalf("claim after finish = %+v, %v", other, err)
	}
}
