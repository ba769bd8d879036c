package testenv

import (
	"bytes"
	"net"
	"os"
	"os/exec"
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
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
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
