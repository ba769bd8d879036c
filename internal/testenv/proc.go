package testenv

import (
	"bytes"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Proc is a server a test started (nginx, haproxy, a proxy): stopped by
// its own PID, never by name.
type Proc struct {
	cmd   *exec.Cmd
	sig   os.Signal
	grace time.Duration
	// Exited is closed once the process has exited.
	Exited chan struct{}
}

// Start starts cmd (its output wherever cmd says) or fails the test, and
// reaps it when it exits. Stop sends it sig, and kills it if it has not
// exited within grace.
func Start(t testing.TB, cmd *exec.Cmd, sig os.Signal, grace time.Duration) *Proc {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &Proc{cmd: cmd, sig: sig, grace: grace, Exited: make(chan struct{})}
	go func() { cmd.Wait(); close(p.Exited) }()
	return p
}

// Stop stops the process and waits until it has exited.
func (p *Proc) Stop() {
	p.cmd.Process.Signal(p.sig)
	select {
	case <-p.Exited:
	case <-time.After(p.grace):
		p.cmd.Process.Kill()
		<-p.Exited
	}
}

// FreePort is a TCP port free on 127.0.0.1 just now, for a server a test
// starts (another process may take it before the server binds it: tests
// that start servers retry on "address already in use").
//
// It is taken below the kernel's ephemeral range
// (net.ipv4.ip_local_port_range), never from it: a port the kernel handed
// out for bind(":0") and that the test then freed may be handed out again
// at once, to the test's next listener on ":0" (an upstream, httptest) or
// as the source port of a connection (nginx to its upstream), and the
// server the port was meant for then fails with "address already in use"
// (TestProxyTrust did, once). Below that range only another explicit
// choice takes it.
func FreePort(t testing.TB) int {
	t.Helper()
	lo := ephemeralLow()
	for range 1000 {
		port := 10000 + rand.IntN(lo-10000)
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue // in use: another
		}
		l.Close()
		return port
	}
	t.Fatalf("no free TCP port on 127.0.0.1 between 10000 and %d", lo)
	return 0
}

// ephemeralLow is the least port of the kernel's ephemeral range (32768
// when it cannot be read, Linux's default).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	lo, err := strconv.Atoi(f[0])
	if err != nil || lo <= 10000+100 {
		return 32768
	}
	return lo
}

// Buffer collects a child process's output (cmd.Stdout, cmd.Stderr) while
// the test reads it: a bytes.Buffer behind a mutex.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
