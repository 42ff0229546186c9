package kafka_test

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/onceonly/onceonly/internal/platform/kafka"
	"github.com/onceonly/onceonly/internal/platform/testkit"
)

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func TestPing_NilOnKfakeErrorWithinDeadlineOnDeadOrSilentBroker(t *testing.T) {
	t.Parallel()
	brokers := testkit.Kafka(t)

	// silent accepts connections and never answers; conns reports each
	// accepted connection so the test can see the client close it.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { silent.Close() })
	conns := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			conns <- c
		}
	}()

	cases := []struct {
		name    string
		brokers []string
		timeout time.Duration
		wantErr bool
	}{
		{"kfake answers", brokers, 5 * time.Second, false},
		{"one live broker is enough", []string{closedAddr(t), brokers[0]}, 5 * time.Second, false},
		{"closed port", []string{closedAddr(t)}, 2 * time.Second, true},
		{"silent broker", []string{silent.Addr().String()}, 300 * time.Millisecond, true},
	}
	for _, tc := range cases {
		ctx, cancel := context.WithTimeout(context.Background(), tc.timeout)
		start := time.Now()
		err := kafka.Ping(ctx, tc.brokers)
		took := time.Since(start)
		cancel()
		if (err != nil) != tc.wantErr {
			t.Errorf("%s: Ping = %v, want error %v", tc.name, err, tc.wantErr)
		}
		// Slack for a loaded 2-core machine, far below any hang.
		if took > tc.timeout+500*time.Millisecond {
			t.Errorf("%s: Ping took %v, past its %v deadline", tc.name, took, tc.timeout)
		}
		t.Logf("%s: %v in %v", tc.name, err, took)
	}

	// The silent broker's connection was closed by Ping, not left open.
	select {
	case c := <-conns:
		defer c.Close()
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		buf := make([]byte, 512)
		for {
			if _, err := c.Read(buf); err != nil {
				var ne net.Error
				if !errors.Is(err, io.EOF) && !(errors.As(err, &ne) && !ne.Timeout()) {
					t.Errorf("silent broker's connection still open after Ping returned: %v", err)
				}
				break
			}
		}
	case <-time.After(5 * time.Second):
		t.Error("Ping never connected to the silent broker")
	}
}

func TestEnsureTopics_CreatesMissingTopicsAndAcceptsExistingOnes(t *testing.T) {
	t.Parallel()
	brokers := testkit.Kafka(t, "already.there")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	specs := []kafka.TopicSpec{
		{Name: "payment.events", Partitions: 6, ReplicationFactor: 1},
		{Name: "payment.events.dlq"}, // broker defaults
		{Name: "already.there", Partitions: 12},
	}
	for i := range 2 { // the second run finds them all and is not an error
		if err := kafka.EnsureTopics(ctx, brokers, specs...); err != nil {
			t.Fatalf("EnsureTopics run %d: %v", i+1, err)
		}
	}
	c, err := sarama.NewClient(brokers, kafka.ConsumerConfig("test-describe"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for topic, want := range map[string]int{"payment.events": 6, "payment.events.dlq": 3, "already.there": 3} {
		ps, err := c.Partitions(topic)
		if err != nil || len(ps) != want {
			t.Errorf("%s: %d partitions (%v), want %d", topic, len(ps), err, want)
		}
	}

	dead, cancel2 := context.WithTimeout(context.Background(), time.Second)
	defer cancel2()
	start := time.Now()
	if err := kafka.EnsureTopics(dead, []string{closedAddr(t)}, specs[0]); err == nil {
		t.Error("EnsureTopics against a closed port succeeded")
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("EnsureTopics against a closed port took %v, past its 1 s deadline", took)
	}
}
