// Package kafka is the project's one way to talk to Kafka (through sarama):
// the producer and consumer configs, explicit topic creation, a readiness
// ping, a consumer-group runner, and a dead-letter helper.
//
// What it guarantees:
//
//   - At-least-once delivery to the handler. The Runner hands each partition's
//     messages to a BatchHandler in offset order, and marks and commits
//     (synchronously) the batch's last offset only after the handler returned
//     nil. A crash, a rebalance or a shutdown before that redelivers the
//     batch; nothing committed is delivered again by a clean restart.
//   - A failing handler is retried in place, with capped exponential backoff,
//     with the same batch, until it succeeds or the session ends (shutdown or
//     rebalance; the batch is then redelivered to whoever owns the partition
//     next). The Runner never marks past a failed message: sarama does not
//     redeliver inside a session, so skipping it once would lose it for good.
//   - The idempotent producer (ProducerConfig: acks=all, one request in flight,
//     retries) writes no duplicates from its own retries: the broker drops a
//     retried batch by producer id and sequence number. Messages with one key
//     (order_id) go to one partition, in the order they were acknowledged.
//
// What it does not guarantee:
//
//   - Exactly-once effects end to end. A handler may see a message twice
//     (after a crash, a failed commit, or a batch interrupted by a rebalance);
//     the consumer's dedup table (consumed_events, in the handler's own
//     transaction) makes the second time a no-op.
//   - No duplicates across producer sessions. A producer that restarts
//     mid-batch (or a relay that crashes between publish and marking its
//     outbox row) sends again under a new producer id, which the broker cannot
//     match with the first; the consumer's dedup absorbs it.
//   - Progress past a message that always fails. The Runner retries forever;
//     deciding that a message is poison (undecodable, unknown order) and
//     calling DeadLetter is the domain handler's job.
//
// Failure boundary: the Runner relies on eager rebalancing (session context
// ends on every rebalance) and refuses cooperative strategies. A member killed
// without leaving keeps its partitions until the session timeout (6 s, kfake's
// minimum) expires. Commit errors are asynchronous in sarama: they are logged
// and retried by the next commit, and until then a restart redelivers.
// Committing every batch costs a round trip that, in sarama, queues behind
// the long-poll fetch on the same connection (see ConsumerConfig).
//
// kfake caveats (tests and the demo): it is a protocol-level stand-in, not
// Kafka. It keeps data in memory unless given a directory, has one replica
// per partition on one broker by default (acks=all means little there), and
// advertises its real listener, so a proxy in front is bypassed after the
// first metadata call.
package kafka
