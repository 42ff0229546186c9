package ratelimit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// gcraScript is GCRA (the generic cell rate algorithm): a user's state is one
// number, the theoretical arrival time (TAT) of their next request, in
// microseconds. A request is admitted when it would not push the TAT further
// than the burst tolerance ahead of now. Read, decide and write happen in one
// script, so concurrent requests of one user across the fleet cannot both
// take the last unit (a GET-then-SET from Go could).
//
// Now comes from the Redis server's TIME, not from the caller: every instance
// then measures against one clock, and an instance whose clock runs ahead can
// neither drain a user's bucket nor refill it early. Tests may pass ARGV[3] to
// drive the script's clock deterministically; production code never does.
//
// The key expires when the bucket would be full again, so an idle user costs
// nothing, and a missing key means exactly "full". A denial writes nothing.
//
// KEYS[1] the user's key; ARGV[1] emission interval (µs per request);
// ARGV[2] burst tolerance (interval × burst, µs); ARGV[3] optional now (µs).
// Returns {allowed 0|1, remaining, retry after (µs)}.
const gcraScript = `
local interval = tonumber(ARGV[1])
local tolerance = tonumber(ARGV[2])
local now
if ARGV[3] then
  now = tonumber(ARGV[3])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local tat = tonumber(redis.call('GET', KEYS[1])) or now
if tat < now then
  tat = now
end
local new_tat = tat + interval
local allow_at = new_tat - tolerance
if allow_at > now then
  return {0, 0, allow_at - now}
end
redis.call('SET', KEYS[1], new_tat, 'PX', math.ceil((new_tat - now) / 1000))
return {1, math.floor((tolerance - (new_tat - now)) / interval), 0}
`

// script runs as EVALSHA, and as EVAL only after NOSCRIPT (a restarted or
// failed-over Redis has an empty script cache): one round trip normally.
var script = redis.NewScript(gcraScript)

// maxUserLen bounds the bytes a user id may occupy in Redis and in the LRU;
// longer ids are hashed, so a hostile header cannot bloat memory.
const maxUserLen = 128

func userKey(user string) string {
	if len(user) <= maxUserLen {
		return user
	}
	sum := sha256.Sum256([]byte(user))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// redisTier is the fleet-wide per-user limit.
type redisTier struct {
	rdb       redis.Scripter
	prefix    string
	interval  string // µs, preformatted: the hot path formats nothing
	tolerance string
	timeout   time.Duration
	// clock, when set (tests only), replaces the server's TIME.
	clock func() time.Time
}

func newRedisTier(rdb redis.Scripter, c Config) *redisTier {
	interval := max(1, int64(math.Round(1e6/c.UserRPS)))
	return &redisTier{
		rdb:       rdb,
		prefix:    c.KeyPrefix + "rl:",
		interval:  strconv.FormatInt(interval, 10),
		tolerance: strconv.FormatInt(interval*int64(c.UserBurst), 10),
		timeout:   c.RedisTimeout,
	}
}

type redisResult struct {
	d   Decision
	err error
}

// allow asks Redis, waiting at most t.timeout. The call runs in its own
// goroutine because go-redis ignores a context deadline on the socket unless
// the client was built with ContextTimeoutEnabled: a slow Redis would hold
// the request for the client's ReadTimeout (seconds), not our budget. The
// abandoned call finishes in the background; the breaker keeps the number of
// such calls small.
func (t *redisTier) allow(ctx context.Context, user string) (Decision, error) {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	done := make(chan redisResult, 1) // buffered: a late reply never blocks
	go func() {
		d, err := t.call(ctx, user)
		done <- redisResult{d, err}
	}()
	select {
	case r := <-done:
		return r.d, r.err
	case <-ctx.Done():
		return Decision{}, fmt.Errorf("ratelimit: redis: %w", ctx.Err())
	}
}

func (t *redisTier) call(ctx context.Context, user string) (Decision, error) {
	args := []any{t.interval, t.tolerance}
	if t.clock != nil {
		args = append(args, t.clock().UnixMicro())
	}
	res, err := script.Run(ctx, t.rdb, []string{t.prefix + user}, args...).Int64Slice()
	if err != nil {
		return Decision{}, fmt.Errorf("ratelimit: redis: %w", err)
	}
	if len(res) != 3 {
		return Decision{}, fmt.Errorf("ratelimit: redis: script returned %d values, want 3", len(res))
	}
	return Decision{
		Allowed:    res[0] == 1,
		Remaining:  int(res[1]),
		RetryAfter: time.Duration(res[2]) * time.Microsecond,
		Tier:       TierUser,
	}, nil
}
