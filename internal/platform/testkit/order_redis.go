package testkit

import (
	"net"
	"os/exec"
	"time"
)

// RestartSamePort starts the server again with the same command line, so on
// the same port: to clients it is the Redis that came back after an outage
// (with no data: the server runs without persistence). It kills the running
// process first if there is one. The test fails if the port does not answer
// within 10 s.
func (p *RedisProc) RestartSamePort() {
	p.t.Helper()
	p.Kill()
	cmd := exec.Command(p.cmd.Path, p.cmd.Args[1:]...)
	if err := cmd.Start(); err != nil {
		p.t.Fatalf("restart redis-server: %v", err)
	}
	p.cmd = cmd // the Cleanup registered by RedisServer kills this one
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", p.Addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("redis-server on %s did not come back: %v", p.Addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
