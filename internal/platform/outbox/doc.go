// Package outbox publishes an event to Kafka if and only if the database
// transaction that produced it commits: the transactional outbox.
//
// The business change and its event row commit together (Add, inside the
// caller's transaction). A relay — one active instance, chosen by the lock
// package's Redis lock and fenced by its token — reads unpublished rows by
// their flag in id order, publishes them with sarama's idempotent producer
// (acks=all, one request in flight), and then marks them published in a fenced
// transaction. It is woken by Notify after a commit and polls as a fallback.
// Published rows are pruned after Retention.
//
// Guarantees:
//   - Every committed event is published at least once, whatever crashes,
//     broker outages or lock changes happen, as long as its row is not
//     deleted by hand: a row stays unpublished until a relay has had it
//     acknowledged by the broker, and every round starts again from the first
//     unpublished row.
//   - None is skipped under concurrent writers: rows are selected by
//     "published_at IS NULL ORDER BY id" every round, never after a
//     remembered id. (An auto-increment id is taken at insert but visible at
//     commit; a "last id sent" cursor skips a lower id that commits late.)
//   - Per key (topic + Kafka key), the first publication of each event is in
//     id order: an event is sent only after every earlier selected event of
//     its key was acknowledged, and a failure blocks its key, not the others
//     (see "ordering" below). The id order is the commit order for events
//     whose transactions are serialised by the business, which is how one
//     key's sequence arises (payment SUCCEEDED, then REFUNDED, each a CAS on
//     the payment row). Two transactions writing the same key at the same
//     time have no order to keep; the later-committing one may go out first.
//   - A relay that has lost its lock cannot mark or prune anything once a
//     newer holder has taken its token (lock.ErrFenced; counted in
//     onceonly_outbox_fenced_total): it stops, and the new holder publishes
//     whatever it left unmarked.
//   - A commit followed by Notify is published without waiting for a poll;
//     without Notify (another process, a lost wake-up) within PollInterval
//     plus a round.
//
// Not guaranteed:
//   - Exactly once on the topic. A crash (or a database error) between the
//     broker's acknowledgement and the mark republishes the batch, and a
//     stale relay can still publish — a Kafka send cannot be fenced. Each
//     message carries its event_id as a header and in its payload; consumers
//     must de-duplicate on it (the order service's consumed_events does). The
//     idempotent producer only removes its own retries within one session.
//   - Order between different keys, or for keyless messages.
//   - Progress while Redis (the lock) or the database is unreachable: the
//     relay waits; the backlog grows and is reported.
//
// Failure boundary:
//
//	failure                               what happens
//	crash between publish and mark        rows stay unpublished; the next holder (after the
//	                                      lease, LOCK_EXPIRY) republishes them: duplicates
//	broker down                           sends fail, nothing is marked, attempts and last_error
//	                                      are recorded, the relay backs off (100ms doubling to
//	                                      5s) and retries from the first unpublished row with
//	                                      a new producer; commits keep succeeding meanwhile
//	one message or partition refused      that key is blocked for the round, other keys go on;
//	                                      the refused one is retried first next round
//	database down                         select/mark fail and are retried with backoff; Add
//	                                      fails with the business transaction (nothing is half
//	                                      written); a lost mark is retried before the next
//	                                      select, so a blip republishes nothing (unless the lock
//	                                      changes hands meanwhile: the next holder republishes)
//	lock lost (Redis failover, expiry)    the watchdog cancels the relay; a mark already under
//	                                      way either commits before the new token or is fenced
//	concurrent writers, out-of-order      a late-committing lower id is found by the next
//	commit visibility                     round's flag select; nothing is skipped
//	relay paused past its lease           another instance takes the lock and a newer token;
//	(GC, SIGSTOP)                         when the paused one wakes, its in-flight send may
//	                                      still reach Kafka (a duplicate) but its mark is fenced
//	event's topic missing / too large     the event's key is stuck, retried for ever and visible
//	                                      in attempts, last_error and the oldest-age metric;
//	                                      other keys keep flowing
//
// Ordering on partial failure: sarama's SendMessages may fail some messages
// and acknowledge others of the same call, and after a failure sarama rolls
// the idempotent producer's epoch over, so the broker would accept a later
// message of the same partition after a gap. The relay therefore never has
// two messages of one key in flight: a batch is split into waves (wave n
// holds the n-th message of each key, so at most one per key) sent one after
// another, and a failed message's key gets no further message in that round.
// Every acknowledged message is then marked — per key the acknowledged ones
// are a prefix of the key's selected ones — and the next round starts with the
// failed one. With distinct keys a batch is one SendMessages call; a key with
// k events in a batch costs k sequential calls.
//
// Marks run on a context detached from the job's (bounded by 10 s), so a
// graceful shutdown right after a publish still records it; the fence, not
// the context, keeps a stale relay out. Redrive (reconciliation) sets
// published_at back to NULL on an existing row; the row goes out again in its
// original id position, typically after newer events of its key.
//
// Metrics (onceonly_outbox_*): backlog and oldest_unpublished_age_seconds
// (read from the table at scrape time, so every instance reports them, also
// while no relay runs), published_total, publish_errors_total, marked_total,
// fenced_total, pruned_total, db_errors_total{stage}, batch_duration_seconds.
//
// Schema: append Migrations() (and lock.Migrations()) to the service's own
// migrations; outbox_events must live in the business rows' database.
package outbox
