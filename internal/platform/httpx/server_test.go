package httpx

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"
)

func TestNewServer_SetsEveryTimeout(t *testing.T) {
	t.Parallel()
	srv := NewServer(":0", http.NotFoundHandler(), ServerOptions{})
	if srv.ReadHeaderTimeout != 5*time.Second || srv.ReadTimeout != 15*time.Second ||
		srv.WriteTimeout != 30*time.Second || srv.IdleTimeout != 60*time.Second ||
		srv.MaxHeaderBytes != 64<<10 || srv.ErrorLog == nil {
		t.Errorf("defaults: %+v", srv)
	}
	// The payment service answers a reconciliation bounded by RECONCILE_TIMEOUT.
	long := NewServer(":0", http.NotFoundHandler(), ServerOptions{WriteTimeout: 2*time.Minute + 10*time.Second})
	if long.WriteTimeout != 2*time.Minute+10*time.Second || long.ReadTimeout != 15*time.Second {
		t.Errorf("override: write %s read %s", long.WriteTimeout, long.ReadTimeout)
	}
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	return ln
}

func TestServe_CancelDrainsTheInFlightRequestThenStops(t *testing.T) {
	t.Parallel()
	started := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		close(started)
		time.Sleep(200 * time.Millisecond) // still running when shutdown begins
		_, _ = io.WriteString(w, "done")
	})
	ln := listen(t)
	addr := ln.Addr().String()
	srv := NewServer(addr, mux, ServerOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- Serve(ctx, srv, ln, 5*time.Second, slog.New(slog.DiscardHandler)) }()

	type result struct {
		body string
		err  error
	}
	got := make(chan result, 1)
	go func() {
		resp, err := http.Get("http://" + addr + "/slow")
		if err != nil {
			got <- result{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		got <- result{string(b), err}
	}()
	<-started
	cancel()

	if err := <-served; err != nil {
		t.Fatalf("Serve = %v, want nil after a clean drain", err)
	}
	select {
	case r := <-got:
		if r.err != nil || r.body != "done" {
			t.Fatalf("in-flight request: %q, %v; want it completed", r.body, r.err)
		}
	default:
		t.Fatal("Serve returned before the in-flight request was answered")
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Error("listener still accepts after Serve returned")
	}
}

func TestServe_DrainBoundCutsOffAStuckRequestAndSaysSo(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	started := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/stuck", func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-release
	})
	t.Cleanup(func() { close(release) })
	ln := listen(t)
	srv := NewServer("", mux, ServerOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- Serve(ctx, srv, ln, 50*time.Millisecond, slog.New(slog.DiscardHandler)) }()
	go func() {
		if resp, err := http.Get("http://" + ln.Addr().String() + "/stuck"); err == nil {
			resp.Body.Close()
		}
	}()
	<-started
	cancel()
	select {
	case err := <-served:
		if err == nil {
			t.Error("Serve = nil although a request outlived the drain")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after the drain bound")
	}
}

func TestServe_ReturnsTheServeError(t *testing.T) {
	t.Parallel()
	ln := listen(t)
	ln.Close() // Serve fails at once: nothing to accept on
	err := Serve(context.Background(), NewServer("", http.NotFoundHandler(), ServerOptions{}), ln, time.Second, slog.New(slog.DiscardHandler))
	if err == nil {
		t.Error("Serve = nil on a closed listener")
	}
}
