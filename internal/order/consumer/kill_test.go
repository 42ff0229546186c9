package consumer_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/onceonly/onceonly/internal/order/consumer"
	"github.com/onceonly/onceonly/internal/order/store"
	"github.com/onceonly/onceonly/internal/payment/events"
	"github.com/onceonly/onceonly/internal/platform/db"
	"github.com/onceonly/onceonly/internal/platform/kafka"
	"github.com/onceonly/onceonly/internal/platform/testkit"
)

// The child: this test binary re-executed with childEnv set runs the real
// consumer (consumer.Consumer in a kafka.Runner, the production sarama
// config) against the parent's database and kfake, and prints a line from
// the BeforeCommit hook — inside the batch transaction, after its last
// UPDATE, before COMMIT. With CHILD_PAUSE_AT=n it stops there on its n-th
// batch, so the parent's SIGKILL lands exactly between UPDATE and COMMIT.
const (
	childEnv       = "ORDER_CONSUMER_CHILD"
	childInstance  = "order-consumer-under-test"
	markerBatch    = "before-commit"
	markerPaused   = "paused-before-commit"
	markerConsumes = "child consuming"
)

func runChild() int {
	ctx := context.Background()
	brokers := strings.Split(os.Getenv("CHILD_BROKERS"), ",")
	pauseAt, _ := strconv.ParseInt(os.Getenv("CHILD_PAUSE_AT"), 10, 64)
	gdb, err := db.Open(ctx, os.Getenv("CHILD_DSN"), db.Options{MaxOpenConns: 8})
	if err != nil {
		fmt.Println("child:", err)
		return 1
	}
	st, err := store.New(gdb, nil)
	if err != nil {
		fmt.Println("child:", err)
		return 1
	}
	dlq, err := sarama.NewSyncProducer(brokers, kafka.ProducerConfig("child-dlq"))
	if err != nil {
		fmt.Println("child:", err)
		return 1
	}
	var batches atomic.Int64
	c, err := consumer.New(consumer.Config{DB: gdb, Store: st, DeadLetters: kafka.NewDeadLetterer(dlq, events.DLQTopic, nil),
		BeforeCommit: func(b []*sarama.ConsumerMessage) {
			n := batches.Add(1)
			first, last := b[0], b[len(b)-1]
			fmt.Printf("%s n=%d partition=%d first=%d last=%d\n", markerBatch, n, first.Partition, first.Offset, last.Offset)
			if n == pauseAt {
				fmt.Printf("%s partition=%d first=%d last=%d\n", markerPaused, first.Partition, first.Offset, last.Offset)
				select {} // until SIGKILL: the transaction stays open, uncommitted
			}
		}})
	if err != nil {
		fmt.Println("child:", err)
		return 1
	}
	// Static membership: a restarted child with the same instance id takes
	// over the dead one's partitions at once, instead of after kfake's 6 s
	// session timeout.
	cfg := kafka.ConsumerConfig(consumer.Group)
	cfg.Consumer.Group.InstanceId = childInstance
	r, err := kafka.NewRunner(c.RunnerConfig(brokers, cfg, nil, nil))
	if err != nil {
		fmt.Println("child:", err)
		return 1
	}
	fmt.Println(markerConsumes)
	_ = r.Run(ctx)
	return 0
}

// 2,000 events; the consumer process is SIGKILLed five times — twice while
// paused between its UPDATEs and its COMMIT, three times a random moment
// after a random batch — and restarted each time. In the end every order is
// PAID by exactly one transition, consumed_events has one row per event, and
// nothing is missing.
func TestConsume_ConsumerKilledMidTransactionAppliesEveryEventExactlyOnce(t *testing.T) {
	t.Parallel()
	dsn := testkit.DSN(t)
	gdb, err := db.Open(context.Background(), dsn, db.Options{MaxOpenConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close(gdb) })
	if err := db.Migrate(context.Background(), gdb, nil, migrations()...); err != nil {
		t.Fatal(err)
	}
	brokers := testkit.Kafka(t, events.Topic, events.DLQTopic)
	const n = 2000
	ids := seedOrders(t, gdb, n, time.Now())
	msgs := newProducer(t, brokers).events(succeeded(ids)...)
	orderAt := map[string]int64{}
	for i, m := range msgs {
		orderAt[fmt.Sprintf("%d@%d", m.Partition, m.Offset)] = ids[i]
	}

	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	env := []string{childEnv + "=1", "CHILD_DSN=" + dsn, "CHILD_BROKERS=" + strings.Join(brokers, ",")}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	start := time.Now()
	for kill := 1; kill <= 5; kill++ {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		pause := 0
		if kill == 1 || kill == 4 {
			pause = 1 + rng.IntN(3)
		}
		child := testkit.Start(t, exe, append(env, "CHILD_PAUSE_AT="+strconv.Itoa(pause)), "-test.run=^$")
		if pause > 0 {
			line, ok := child.WaitLine(ctx, markerPaused)
			if !ok {
				cancel()
				t.Fatalf("kill %d: no %q line", kill, markerPaused)
			}
			kill9(t, child)
			var p int32
			var first, last int64
			if _, err := fmt.Sscanf(line[len(markerPaused):], " partition=%d first=%d last=%d", &p, &first, &last); err != nil {
				t.Fatalf("marker %q: %v", line, err)
			}
			if kill == 1 { // the first child's batches are all fresh: none of this one may show
				for off := first; off <= last; off++ {
					id := orderAt[fmt.Sprintf("%d@%d", p, off)]
					if r := orderRows(t, gdb, []int64{id})[id]; r.Status != "PENDING_PAYMENT" || r.Version != 1 {
						t.Fatalf("killed before COMMIT, yet order %d (partition %d offset %d) is %+v", id, p, off, r)
					}
				}
			}
			t.Logf("kill %d: SIGKILL between UPDATE and COMMIT (batch %d, partition %d, offsets %d–%d)", kill, pause, p, first, last)
		} else {
			after := 1 + rng.IntN(4)
			if _, ok := child.WaitLine(ctx, fmt.Sprintf("%s n=%d ", markerBatch, after)); !ok {
				cancel()
				t.Fatalf("kill %d: no batch %d", kill, after)
			}
			time.Sleep(time.Duration(rng.IntN(30)) * time.Millisecond)
			kill9(t, child)
			t.Logf("kill %d: SIGKILL at a random point after batch %d", kill, after)
		}
		cancel()
		t.Logf("after kill %d: %d of %d events consumed", kill, count(t, gdb, "SELECT COUNT(*) FROM consumed_events"), n)
	}
	testkit.Start(t, exe, append(env, "CHILD_PAUSE_AT=0"), "-test.run=^$")
	waitFor(t, 60*time.Second, "all 2,000 events consumed by the last child", func() bool {
		return count(t, gdb, "SELECT COUNT(*) FROM consumed_events") >= n
	})
	assertPaidOnce(t, gdb, ids)
	if rows := count(t, gdb, "SELECT COUNT(*) FROM consumed_events"); rows != n {
		t.Fatalf("consumed_events has %d rows, want %d", rows, n)
	}
	t.Logf("5 kills and 6 consumer processes in %s", time.Since(start).Round(time.Millisecond))
}

func kill9(t *testing.T, p *testkit.Proc) {
	t.Helper()
	if err := p.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.Wait(10 * time.Second) // -1 either way: killed by a signal, or still running
	if err := syscall.Kill(p.Cmd.Process.Pid, 0); err == nil {
		t.Fatal("child still running 10 s after SIGKILL")
	}
}
