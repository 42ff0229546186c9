// Package lock runs scheduled jobs (outbox relay, timeout closer,
// reconciliation) on one instance at a time, and makes the database refuse the
// writes of an instance that has lost the lock without noticing.
//
// Each tick a Runner tries a redsync mutex once (no queueing behind another
// instance). On success it takes a fencing token from the job's database: a
// per-job counter in job_fences, incremented in one transaction. The job then
// runs with a context that a watchdog cancels, with cause ErrLockLost, as soon
// as an extend of the lease fails, is refused or comes back late. Every write
// transaction of the job goes through Fence.Tx, which first locks the job's
// fence row and checks that the job's token is still the newest issued.
//
// Guarantees:
//   - Mutual exclusion in the normal case: while Redis keeps the key, one
//     instance runs the job. Redlock over several independent nodes
//     (Config.Addrs) keeps this while a minority of nodes is down.
//   - Fencing, whatever Redis does: once a newer holder has taken its token, no
//     Fence.Tx of an older holder commits, whether or not the newer holder has
//     written anything yet. A fenced transaction that was already in progress
//     holds the fence row, so it either commits before the newer token is
//     issued or is refused with ErrFenced. The database decides, not Redis: a
//     failover that loses the key, a process paused past its lease (GC, SIGSTOP,
//     a VM migration) or a clock jump can give two instances the lock at once,
//     and only the newest of them can still write.
//   - A holder learns that it lost the lock: its context is cancelled within
//     one extend interval (Expiry/3) plus one Redis timeout (Expiry/10,
//     within 200 ms to 1 s), and before the lease it last renewed ends.
//
// Failure boundary (what this does not do):
//   - Only writes made through Fence.Tx, in the database that holds
//     job_fences, are fenced. Side effects outside it (a Kafka publish, a
//     gateway refund, an HTTP call) cannot be: make them idempotent (event
//     ids, refund keys), because a stale holder can still perform them.
//   - A job can run again over work a previous holder committed before losing
//     the lock: write each step as a conditional UPDATE so repeating it is
//     harmless, and decide inside the fenced transaction, not from data read
//     before it.
//   - Redis unreachable (or Redlock without a majority): ticks are skipped and
//     counted; the jobs do not run until Redis answers again. The database
//     unreachable: likewise, nothing runs without a token.
//   - A stale holder's context is cancelled only once its watchdog notices;
//     until then it may read, compute and call out. Fencing, not the
//     context, is what keeps its writes out.
//
// redsync has no watchdog of its own (go-redsync/redsync#153 was closed as
// wontfix); the one here never uses WithSetNXOnExtend, which would silently
// re-acquire a lock that another instance may hold in the meantime. go-redis
// ignores context deadlines unless ContextTimeoutEnabled is set, so the Redis
// clients built here set it (and New rejects clients that do not), or an
// extend's deadline would not bound it.
//
// Schema: append Migrations() to the service's own migrations; the
// fence row must live in the same database as the rows the job writes.
package lock
