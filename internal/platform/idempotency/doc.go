// Package idempotency is the Redis side of one-time submit tokens (DESIGN.md,
// technique 1): a client asks for a token, sends it as the Idempotency-Key of
// its submit, and however often that submit is retried or duplicated, at most
// one attempt at a time gets to create the order, and the others learn what
// happened to it.
//
// A token is a Redis hash that moves issued → inflight → done, each step one
// Lua script, so "check the token, then take it" never spans two round trips
// (the "check, then delete" trap). Redis is the fast path, not the last word:
// the order service's UNIQUE index on orders.submit_token, with the body hash
// stored on the order row, decides whenever Redis has lost or outlived state.
//
// # Caller protocol (order service)
//
//	POST /v1/orders/tokens: Issue → 201 {token, expires_at}; too_many_tokens → 429.
//	POST /v1/orders: validate the body first (a 400 must not use up the key),
//	h := BodyHash(normalised request), then Claim(user, key, h):
//	  error    → 503 dependency_unavailable; never insert, never "invalid"
//	  Invalid  → look the key up in the DB, scoped to the user: an order with
//	             the same hash → 200 replay, another hash → 422; none → 400
//	  InUse    → 409 idempotency_key_in_use
//	  Done     → 200 replay of OrderID, Idempotent-Replayed: true
//	  Reused   → 422 idempotency_key_reused
//	  Claimed  → INSERT the order with submit_token and body_hash, then
//	    inserted         → Finish(token, lease, id) → 201. If Finish fails the
//	                       order still stands: answer 201; replays come from the DB.
//	    unique violation → an earlier attempt won: load it; same hash →
//	                       Finish(its id), 200 replay; another hash → Release, 422
//	                       (Finish would record this attempt's hash beside it).
//	    transient error  → Release, so the client may retry at once → 503.
//
// Bound the attempt (context deadline) below Config.Lease so a live attempt
// rarely loses its lease.
//
// # Guarantees
//
//   - Of any number of concurrent claims of one token, exactly one is Claimed;
//     the rest are InUse (or Done/Reused once it finished).
//   - A token is bound to the user it was issued to; anyone else gets Invalid,
//     the same answer as for an unknown or expired token.
//   - A finished token answers Done (same body hash) or Reused (other hash)
//     until its TTL ends; the TTL is never extended or cut by claim or finish.
//   - Finish and Release act only with the current lease id: a stale attempt
//     whose lease ran out and was re-claimed cannot overwrite the newer one.
//   - Issue never takes a user above MaxUnused unused tokens: the count and
//     the add are one script (Release may put a user above it; Issue then
//     refuses until they are below).
//   - Every Redis failure is an error (apperr dependency_unavailable), never
//     an outcome: the caller fails closed.
//
// # Not guaranteed
//
//   - Exactly one order by Redis alone. A lease can run out while its attempt
//     still runs; the next claim then gets in (Claim.Reclaimed), and the
//     unique index refuses the second insert. Redis can lose a claim or a
//     finish (restart without persistence, failover before replication,
//     eviction): the token then reads Invalid or issued again, and the DB
//     answers. Run Redis with maxmemory-policy noeviction.
//   - Availability: no Redis, no submits (503), not even replays.
//   - Redis Cluster: the scripts touch a token key and a per-user index key
//     (Release derives the latter from the stored user), which need not share
//     a slot. One primary, with replicas, is assumed.
//
// # Failure boundary
//
//	fault                                     | effect                                        | decided by
//	------------------------------------------+-----------------------------------------------+----------------
//	duplicate submits at the same moment      | one Claimed, others InUse (409)               | Redis script
//	crash after Claim, before the insert      | retry InUse until the lease ends, then claims | lease
//	crash after the insert, before Finish     | lease ends; retry claims, insert is refused,  | UNIQUE index
//	                                          | the caller replays the stored order           |
//	attempt slower than the lease             | second attempt claims; one insert wins; the   | UNIQUE index
//	                                          | stale Finish gets ErrLeaseLost                |
//	Claim reply lost (timeout after the run)  | caller 503s; token in flight until the lease  | lease
//	                                          | ends, then the retry claims                   |
//	Issue/Claim reply late, client re-sends   | the re-sent script answers as the first run   | Redis script
//	                                          | did (same user and token / same lease id)     |
//	Finish reply lost                         | Finish again with the same arguments: nil     | Redis script
//	token TTL ends while in flight            | Finish → ErrLeaseLost; the order stands and   | DB
//	                                          | replays come from the DB                      |
//	Redis loses state (restart, failover)     | Invalid (or issued again); DB lookup replays, | UNIQUE index,
//	                                          | 422s, or refuses the second insert            | body_hash column
//	Redis unreachable or slow past deadline   | every call errors; 503; nothing inserted      | fail closed
//	app instances with skewed clocks          | no effect: leases use the Redis clock (TIME)  | Redis clock
//	failover to a Redis with another clock    | leases run short or long by the difference    | UNIQUE index
//
// # Decisions
//
// Time is the Redis server's (TIME inside the scripts), not the caller's: the
// same clock runs the key TTLs, and no instance's skew can shorten another's
// lease. Tests shorten Config.Lease and Config.TTL instead of faking time.
//
// A different body while in flight is InUse, not Reused: DESIGN.md answers
// 409 for a key in flight, and until that attempt ends nobody knows whether it
// will create an order (after a Release the new body would be legitimate).
// The retry then gets the precise answer, Done or Reused.
//
// Done versus Reused is decided in Go from the stored hash: a done token is
// never changed again, so the comparison cannot race.
//
// Keys, under Config.KeyPrefix: "tok:<token>" (the hash, TTL = token TTL) and
// "user:<user>" (ZSET of the user's unused tokens scored by expiry in ms; the
// Issue script drops expired members itself, and the key expires with its
// newest member).
//
// Metrics (onceonly_idempotency_*): tokens_issued_total, tokens_refused_total,
// claims_total{outcome}, finishes_total{outcome}, releases_total{outcome},
// redis_errors_total{op}.
package idempotency
