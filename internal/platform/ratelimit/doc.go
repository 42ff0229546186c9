// Package ratelimit limits how many requests a user may make, across every
// instance of a service, and keeps limiting when Redis fails.
//
// A request meets three tiers (Limiter.Allow):
//
//  1. instance — a local token bucket (golang.org/x/time/rate) capping what
//     this instance admits in total. Checked first, so an overloaded instance
//     sheds load without a Redis round trip.
//  2. user — the user's GCRA bucket in Redis: one Lua script (EVALSHA, EVAL
//     after NOSCRIPT) reads, decides and writes atomically in one round trip,
//     on the Redis server's clock. Key "<KeyPrefix>rl:<user>", expiring when
//     the bucket would be full again.
//  3. fallback — when a Redis call fails or exceeds RedisTimeout, this
//     instance's share of the user's limit, kept locally: rate
//     UserRPS/Instances, burst UserBurst/Instances (at least 1), users in an
//     LRU of FallbackUsers. Above it the request is denied: fail closed.
//
// A circuit breaker sits in front of Redis: after FailureThreshold consecutive
// failures it opens and requests go straight to the fallback without touching
// Redis; after CoolDown one probe request (one at a time) asks Redis; success
// closes the breaker, failure re-opens it for another CoolDown. The gauge
// onceonly_ratelimit_fallback_active is 1 from the first failed call until a
// call succeeds again.
//
// # Guarantee
//
// While Redis answers, a user is admitted at most UserBurst + UserRPS×W
// requests in any interval W, summed over the whole fleet (so at most
// burst + rate in any second): every admission is one atomic script run
// against one shared state and one clock. While Redis is down, each instance
// admits at most UserBurst/Instances + UserRPS/Instances×W per user, so the
// fleet admits at most the same total if Instances is the real instance
// count. No request is ever admitted without a limit having said yes. Each
// instance admits at most InstanceBurst + InstanceRPS×W requests in total.
//
// # Not guaranteed
//
//   - Instances set wrong: too low and the fleet over-admits during an outage
//     (by real/configured), too high and it under-admits. An uneven load
//     balancer makes a user who lands on one instance get only its share.
//   - The tiers share no state. A switch from Redis to the fallback or back
//     may grant a user one extra burst (the local bucket starts full; the
//     Redis bucket refilled meanwhile). A flapping Redis can therefore admit
//     up to the Redis limit plus the local share limit: at most about twice
//     the configured total while it flaps.
//   - Clock skew between instances is irrelevant (the script uses the Redis
//     server's TIME; local buckets measure only durations on their own
//     instance). A jump of the Redis server's clock moves refills: forward,
//     one early refill (at most one extra burst); backward, a delay.
//   - The local burst is at least 1, so with more instances than UserBurst
//     the fleet's burst during an outage is Instances, not UserBurst.
//   - A call that timed out may still have spent a unit in Redis: the user is
//     then counted twice (under-admits, the safe side).
//   - A user pushed out of the fallback LRU (FallbackUsers other users seen
//     since) starts again with a full local burst.
//   - A denial by the user or fallback tier still spent an instance token: the
//     instance cap counts work done, not requests admitted.
//
// # Failure boundary
//
//	fault                 | what happens                                        | bound
//	----------------------+-----------------------------------------------------+----------------------------------------------
//	Redis down (refused)  | calls fail fast; breaker opens after                | per user: share × Instances = the total;
//	                      | FailureThreshold; fallback decides; one probe per   | no Redis call while open
//	                      | CoolDown; gauge 1                                   |
//	Redis slow            | each call given up at RedisTimeout (a timeout       | added latency ≤ RedisTimeout, for the calls
//	                      | error), then as above                               | before the breaker opens and one probe per CoolDown
//	Redis flapping        | breaker re-opens on a failed probe; each switch     | ≤ Redis limit + local share (≈ 2× total)
//	                      | may grant one extra burst                           |
//	Redis restart/failover| bucket state lost (or stale on a replica): users    | one extra burst per user; script reloaded by
//	                      | start full; empty script cache                      | EVAL once (NOSCRIPT)
//	instance restart      | Redis state kept; local instance and fallback       | user limit unchanged while Redis is up;
//	                      | buckets start full                                  | one local burst per user if Redis is down
//
// Give the limiter a go-redis client with MaxRetries -1 and DialerRetries 1:
// retries and dial back-offs (100 ms each by default) cannot fit in
// RedisTimeout, and would turn a refused connection into a timeout.
//
// The Redis call runs in its own goroutine and is abandoned at RedisTimeout:
// go-redis ignores a context deadline on the socket unless the client has
// ContextTimeoutEnabled, so a slow Redis would otherwise hold every request
// for the client's ReadTimeout (seconds).
package ratelimit
