package testkit

import (
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// Proxy is an in-process toxiproxy TCP proxy between a client under test and
// a real server (MySQL, Redis): Cut drops every connection and refuses new
// ones, Restore lets them through again on the same address.
type Proxy struct {
	// Addr is where clients connect ("127.0.0.1:PORT").
	Addr string
	p    *toxiproxy.Proxy
	t    testing.TB
}

// NewProxy starts a proxy to upstream on a free loopback port, stopped when
// the test ends. (kfake advertises its own listener, so a proxy in front of
// it is bypassed after the first metadata call: restart kfake instead.)
func NewProxy(t testing.TB, upstream string) *Proxy {
	t.Helper()
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	addr := fmt.Sprintf("127.0.0.1:%d", FreePort(t))
	p := toxiproxy.NewProxy(srv, RandomName("proxy-"), addr, upstream)
	if err := p.Start(); err != nil {
		t.Fatalf("toxiproxy to %s: %v", upstream, err)
	}
	t.Cleanup(p.Stop)
	return &Proxy{Addr: addr, p: p, t: t}
}

// Cut closes every proxied connection and stops accepting new ones: the
// server looks down to the client (connection refused).
func (x *Proxy) Cut() { x.p.Stop() }

// Restore accepts connections again on the same address.
func (x *Proxy) Restore() {
	x.t.Helper()
	var err error
	// The port was just released by Cut; retry briefly in case the kernel
	// has not let go of it yet.
	for i := 0; i < 50; i++ {
		if err = x.p.Start(); err == nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	x.t.Fatalf("restore proxy %s: %v", x.Addr, err)
}

// Latency adds a delay to every chunk the server sends back.
func (x *Proxy) Latency(d time.Duration) {
	x.t.Helper()
	if _, err := x.p.Toxics.AddToxicJson(toxicJSON("latency", fmt.Sprintf(`{"latency":%d}`, d.Milliseconds()))); err != nil {
		x.t.Fatalf("add latency: %v", err)
	}
}

func toxicJSON(typ, attrs string) io.Reader {
	return strings.NewReader(fmt.Sprintf(`{"name":%q,"type":%q,"stream":"downstream","toxicity":1,"attributes":%s}`, typ, typ, attrs))
}
