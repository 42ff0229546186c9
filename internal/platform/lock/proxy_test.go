package lock_test

import (
	"net"
	"sync"
	"testing"
	"time"
)

// tcpProxy forwards loopback TCP connections to a target and lets a test cut
// the path in the ways a network fails: refuse (every connection reset at
// once), stall (bytes held, connections stay open: a partition or a hung
// peer), or move to another target (a virtual IP following a failover).
type tcpProxy struct {
	ln net.Listener
	wg sync.WaitGroup

	mu     sync.Mutex
	target string
	refuse bool
	gate   chan struct{} // closed while bytes flow
	links  map[*link]struct{}
}

type link struct {
	a, b net.Conn
	once sync.Once
	done chan struct{}
}

func (l *link) close() {
	l.once.Do(func() {
		close(l.done)
		l.a.Close()
		l.b.Close()
	})
}

func newProxy(t testing.TB, target string) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gate := make(chan struct{})
	close(gate)
	p := &tcpProxy{ln: ln, target: target, gate: gate, links: map[*link]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *tcpProxy) Addr() string { return p.ln.Addr().String() }
func (p *tcpProxy) Port() int    { return p.ln.Addr().(*net.TCPAddr).Port }

// Refuse resets every connection and every new one.
func (p *tcpProxy) Refuse() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refuse = true
	p.dropLocked()
}

// Stall holds every byte read from now on, on open and new connections.
func (p *tcpProxy) Stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.gate:
		p.gate = make(chan struct{})
	default:
	}
}

// Forward drops the connections (and any bytes held) and forwards new ones.
func (p *tcpProxy) Forward() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refuse = false
	p.dropLocked()
	select {
	case <-p.gate:
	default:
		close(p.gate)
	}
}

// SetTarget drops the connections; new ones go to addr.
func (p *tcpProxy) SetTarget(addr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.target = addr
	p.dropLocked()
}

func (p *tcpProxy) dropLocked() {
	for l := range p.links {
		l.close()
		delete(p.links, l)
	}
}

func (p *tcpProxy) close() {
	p.ln.Close()
	p.Forward()
	p.wg.Wait()
}

func (p *tcpProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		refuse, target := p.refuse, p.target
		p.mu.Unlock()
		if refuse {
			c.Close()
			continue
		}
		up, err := net.DialTimeout("tcp", target, time.Second)
		if err != nil {
			c.Close()
			continue
		}
		l := &link{a: c, b: up, done: make(chan struct{})}
		p.mu.Lock()
		if p.refuse || p.target != target {
			p.mu.Unlock()
			l.close()
			continue
		}
		p.links[l] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(l, up, c)
		go p.pipe(l, c, up)
	}
}

func (p *tcpProxy) pipe(l *link, dst, src net.Conn) {
	defer p.wg.Done()
	defer func() {
		p.mu.Lock()
		delete(p.links, l)
		p.mu.Unlock()
		l.close()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			gate := p.gate
			p.mu.Unlock()
			select {
			case <-gate:
			case <-l.done:
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
