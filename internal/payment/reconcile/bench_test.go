package reconcile_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onceonly/onceonly/internal/payment/reconcile"
	"github.com/onceonly/onceonly/internal/platform/testkit"
)

// BenchmarkReconcile measures one run over 100,000 and over 1,000,000
// all-matching payments on real MariaDB, against a fake order service that
// answers every order PAID from a rule (holding none in memory), and
// reports per size:
//
//   - s/run: the run, both sides (payment pages + batch-gets, then the PAID
//     listing + the payments of each listed page) and the report;
//   - peak-RSS-MB: the process's VmHWM during the run (reset before it via
//     /proc/self/clear_refs, so the fixture's insert is not counted), which
//     includes the fake order service serving in the same process;
//   - peak-heap-MB: live heap objects, sampled every 5 ms;
//   - ratio-to-100k (1,000,000 only): its time over the 100,000 run's —
//     10 is linear. Targets: 1,000,000 in ≤ 60 s, peak RSS ≤ 200 MB, ratio ≤ 11.
//
// Never asserted (a shared machine is noisy). Run it with
//
//	TEST_MYSQL_DSN='root:@tcp(127.0.0.1:3306)/' TEST_REDIS_ADDR=127.0.0.1:6379 TEST_REQUIRE_REAL=1 \
//	  go test -run '^$' -bench Reconcile -benchtime 1x -timeout 30m ./internal/payment/reconcile/
func BenchmarkReconcile(b *testing.B) {
	if os.Getenv("TEST_MYSQL_DSN") == "" {
		testkit.NeedReal(b, "the reconciliation benchmark measures MariaDB (TEST_MYSQL_DSN)")
	}
	var base float64
	for _, n := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprintf("payments=%d", n), func(b *testing.B) {
			perRun := benchReconcile(b, n)
			if n == 100_000 {
				base = perRun
			} else if base > 0 {
				b.ReportMetric(perRun/base, "ratio-to-100k")
			}
		})
	}
}

func benchReconcile(b *testing.B, n int) float64 {
	f := newFixture(b, 10)
	// Payments "1".."n" changed over 40 minutes of the hour-long window;
	// order i is PAID, for the same amount, changed a little later.
	start := time.Now().UTC().Add(-50 * time.Minute).Truncate(time.Microsecond)
	step := 40 * time.Minute / time.Duration(n)
	at := func(i int) time.Time { return start.Add(time.Duration(i) * step).Truncate(time.Microsecond) }
	setup := time.Now()
	testkit.BulkInsert(b, f.db, "payments", []string{"id", "order_id", "user_id", "attempt", "status", "amount_cents",
		"currency", "gateway_txn_id", "version", "created_at", "updated_at"}, n, func(i int, row []any) {
		id := strconv.Itoa(i + 1)
		row[0], row[1], row[2], row[3], row[4], row[5] = i+1, id, "u", 1, "SUCCEEDED", int64(100+i%1000)
		row[6], row[7], row[8], row[9], row[10] = "CNY", "txn-"+id, 2, at(i+1), at(i+1)
	})
	f.fake.Generate(n, func(i int) testkit.FakeOrder {
		id := strconv.Itoa(i)
		return testkit.FakeOrder{ID: id, Status: reconcile.OrderPaid, PaymentID: id, AmountCents: int64(100 + (i-1)%1000),
			Currency: "CNY", UpdatedAt: at(i).Add(time.Millisecond)}
	})
	b.Logf("%d payments inserted in %s", n, time.Since(setup).Round(time.Millisecond))
	r := f.reconciler(func(c *reconcile.Config) { c.Timeout = 15 * time.Minute })

	runtime.GC()
	resetPeakRSS(b)
	stop := sampleHeap()
	b.ResetTimer()
	t0 := time.Now()
	for range b.N {
		rep, err := r.RunNow(context.Background(), "bench")
		if err != nil || rep.Status != reconcile.Succeeded || rep.Checked != int64(n) || rep.Matched != int64(n) || rep.DiffsTotal != 0 {
			b.Fatalf("run: %v; report %+v", err, rep)
		}
	}
	elapsed := time.Since(t0)
	b.StopTimer()
	heap := stop()
	perRun := elapsed.Seconds() / float64(b.N)
	rss := peakRSS(b)
	b.ReportMetric(perRun, "s/run")
	b.ReportMetric(rss, "peak-RSS-MB")
	b.ReportMetric(heap, "peak-heap-MB")
	b.Logf("%d payments: %.2f s per run (%.0f payments/s), peak RSS %.1f MB, peak heap %.1f MB; %d batch-gets, %d listing pages",
		n, perRun, float64(n)/perRun, rss, heap, f.fake.BatchCalls(), f.fake.ListCalls())
	return perRun
}

// resetPeakRSS resets the kernel's VmHWM of this process (Linux ≥ 4.0).
func resetPeakRSS(b *testing.B) {
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		b.Logf("cannot reset the peak RSS (%v): it includes the fixture", err)
	}
}

// peakRSS reads VmHWM from /proc/self/status, in MB.
func peakRSS(b *testing.B) float64 {
	fh, err := os.Open("/proc/self/status")
	if err != nil {
		b.Logf("no /proc/self/status: %v", err)
		return 0
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

// sampleHeap samples live heap objects every 5 ms until the returned func is
// called, which returns the peak in MB.
func sampleHeap() func() float64 {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	var peak uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(sample)
			peak = max(peak, sample[0].Value.Uint64())
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	})
	return func() float64 {
		close(done)
		wg.Wait()
		return float64(peak) / (1 << 20)
	}
}
