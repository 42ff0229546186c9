package testkit

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/onceonly/onceonly/internal/platform/embedded"
)

// RestartableKafka is a one-broker kfake cluster on a fixed port with its log
// in a directory, so a test can stop it (a broker outage) and start it again
// as the same broker with the same data. A proxy in front of kfake would be
// bypassed: it advertises its own listener.
type RestartableKafka struct {
	t    testing.TB
	opts embedded.KafkaOptions
	mu   sync.Mutex
	c    *kfake.Cluster
}

// NewRestartableKafka starts the broker with topics (3 partitions each); it is
// stopped when the test ends.
func NewRestartableKafka(t testing.TB, topics ...string) *RestartableKafka {
	t.Helper()
	k := &RestartableKafka{t: t, opts: embedded.KafkaOptions{
		Topics: topics, Partitions: 3, Ports: []int{FreePort(t)}, DataDir: t.TempDir(),
	}}
	k.Start()
	t.Cleanup(k.Stop)
	return k
}

// Brokers returns the broker's address; it is the same across restarts.
func (k *RestartableKafka) Brokers() []string {
	return []string{fmt.Sprintf("127.0.0.1:%d", k.opts.Ports[0])}
}

// Start (re)starts the broker, retrying while the port is being released.
func (k *RestartableKafka) Start() {
	k.t.Helper()
	var err error
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var c *kfake.Cluster
		if c, err = embedded.Kafka(k.opts); err == nil {
			k.mu.Lock()
			k.c = c
			k.mu.Unlock()
			return
		}
		if time.Now().After(deadline) {
			break
		}
	}
	k.t.Fatalf("start kfake on port %d: %v", k.opts.Ports[0], err)
}

// Stop closes the broker (clients see it down); safe to call twice.
func (k *RestartableKafka) Stop() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.c != nil {
		k.c.Close()
		k.c = nil
	}
}
