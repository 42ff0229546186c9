package idempotency

import "github.com/redis/go-redis/v9"

// Each step is one Lua script: Redis runs a script to the end before it runs
// any other command, so "look at the state, then change it" cannot interleave
// with another caller's step. That is the whole fix for the "check, then
// delete" trap: a GET followed by a DEL (or SET) in two round trips lets two
// requests both see "issued".
//
// The token hash holds:
//
//	user       owner; a claim by anyone else is Invalid
//	state      issued | inflight | done
//	lease      lease id of the current (or finishing) claim
//	lease_exp  end of the lease, Redis-clock milliseconds
//	body       body hash stored by the claim
//	order      order id, once done
//
// Times come from the Redis server's TIME, not from the caller: every
// instance then compares leases against the one clock that also runs the key
// TTLs, so a skewed instance clock can neither cut another attempt's lease
// short nor stretch its own. redis.replicate_commands() lets Redis 5/6 run a
// write after TIME (Redis 7 always replicates effects; there it is a no-op).
//
// Numbers are formatted with %d before they are stored: Lua numbers are
// doubles, and a bare conversion may print a millisecond epoch as 1.7e+12.

// nowMS is the Lua prelude shared by the scripts that need the clock.
const nowMS = `
redis.replicate_commands()
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
`

// issueScript: KEYS[1] token hash, KEYS[2] the user's unused index (a ZSET of
// tokens scored by expiry, so expired entries are dropped here, by score,
// without a sweeper). ARGV: user, ttl ms, max unused, token.
// Returns {'issued', expiry ms} | {'too_many'} | {'collision'}.
var issueScript = redis.NewScript(nowMS + `
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[3]) then
  return {'too_many'}
end
if redis.call('EXISTS', KEYS[1]) == 1 then
  -- 130 random bits never collide by chance: an issued key for the same user
  -- is this very call, re-sent by the client after a reply that came late.
  local h = redis.call('HMGET', KEYS[1], 'user', 'state')
  if h[1] == ARGV[1] and h[2] == 'issued' then
    return {'issued', string.format('%d', now + redis.call('PTTL', KEYS[1]))}
  end
  return {'collision'}
end
local ttl = tonumber(ARGV[2])
local exp = string.format('%d', now + ttl)
redis.call('HSET', KEYS[1], 'user', ARGV[1], 'state', 'issued')
redis.call('PEXPIREAT', KEYS[1], exp)
redis.call('ZADD', KEYS[2], exp, ARGV[4])
-- The index must outlive its newest member; an index that never expires
-- would leak one key per user that ever asked for a token.
if redis.call('PTTL', KEYS[2]) < ttl then
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
end
return {'issued', exp}
`)

// claimScript: KEYS[1] token hash, KEYS[2] the user's unused index.
// ARGV: user, new lease id, body hash, lease ms, token.
// Returns {'invalid'} | {'in_use'} | {'done', order, body} |
// {'claimed', reclaimed 0|1}.
var claimScript = redis.NewScript(nowMS + `
local h = redis.call('HMGET', KEYS[1], 'user', 'state', 'lease_exp', 'order', 'body', 'lease')
-- A missing key gives false: unknown, expired and foreign tokens all look
-- alike, so a caller learns nothing about other users' tokens.
if h[1] ~= ARGV[1] then
  return {'invalid'}
end
if h[2] == 'done' then
  return {'done', h[4], h[5]}
end
local reclaimed = 0
if h[2] == 'inflight' then
  if h[6] == ARGV[2] then
    -- The lease id is fresh per attempt: this is the same claim, re-sent by
    -- the client after a reply that came late (go-redis retries on a read
    -- timeout). Answer as the first run did instead of "in use".
    return {'claimed', 0}
  end
  if tonumber(h[3]) > now then
    return {'in_use'}
  end
  -- The lease ran out: its holder crashed, or is still running but too slowly.
  -- Let this attempt in; if both reach the database, the UNIQUE index on
  -- orders.submit_token lets exactly one insert through.
  reclaimed = 1
elseif h[2] ~= 'issued' then
  return redis.error_reply('idempotency: token in unknown state')
end
redis.call('HSET', KEYS[1], 'state', 'inflight', 'lease', ARGV[2],
  'lease_exp', string.format('%d', now + tonumber(ARGV[4])), 'body', ARGV[3])
redis.call('ZREM', KEYS[2], ARGV[5])
return {'claimed', reclaimed}
`)

// finishScript: KEYS[1] token hash. ARGV: lease id, order id.
// Returns 'done' | 'lost'. HSET keeps the key's TTL, so a finished token
// lives exactly as long as the unused one would have.
var finishScript = redis.NewScript(`
local h = redis.call('HMGET', KEYS[1], 'state', 'lease', 'order')
if h[2] ~= ARGV[1] then
  return 'lost'
end
if h[1] == 'inflight' then
  -- Accepted even past lease_exp: the lease id only changes when another
  -- attempt claims, and nobody has, so this attempt's order is the one.
  redis.call('HSET', KEYS[1], 'state', 'done', 'order', ARGV[2])
  redis.call('HDEL', KEYS[1], 'lease_exp')
  return 'done'
end
-- A repeated Finish whose first reply was lost on the network.
if h[1] == 'done' and h[3] == ARGV[2] then
  return 'done'
end
return 'lost'
`)

// releaseScript: KEYS[1] token hash. ARGV: lease id, index key prefix, token.
// Returns 'released' | 'lost'. The index key is built here from the stored
// user, since Release is not told the user; the Store therefore needs a
// single Redis primary, not Redis Cluster.
var releaseScript = redis.NewScript(nowMS + `
local h = redis.call('HMGET', KEYS[1], 'state', 'lease', 'user')
if h[1] ~= 'inflight' or h[2] ~= ARGV[1] then
  return 'lost'
end
redis.call('HSET', KEYS[1], 'state', 'issued')
redis.call('HDEL', KEYS[1], 'lease', 'lease_exp', 'body')
local pttl = redis.call('PTTL', KEYS[1])
if pttl > 0 then
  -- Unused again, so it counts against the cap again; without this a client
  -- could claim and release its way past MaxUnused.
  local idx = ARGV[2] .. h[3]
  redis.call('ZADD', idx, string.format('%d', now + pttl), ARGV[3])
  if redis.call('PTTL', idx) < pttl then
    redis.call('PEXPIRE', idx, pttl)
  end
end
return 'released'
`)
