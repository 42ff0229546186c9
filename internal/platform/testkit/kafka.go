package testkit

import (
	"testing"

	"github.com/onceonly/onceonly/internal/platform/embedded"
)

// Kafka starts a private kfake cluster on a free loopback port with topics
// created (3 partitions each), closes it when the test ends, and returns its
// broker addresses. A cluster per test keeps groups, offsets and topics of
// parallel tests apart; it starts in milliseconds.
func Kafka(t testing.TB, topics ...string) []string {
	t.Helper()
	c, err := embedded.Kafka(embedded.KafkaOptions{Topics: topics, Partitions: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}
