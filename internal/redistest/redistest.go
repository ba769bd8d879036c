// Package redistest runs a real Redis for a test: redis-server on
// 127.0.0.1 on a free port, in the test's temporary directory, without
// persistence unless asked, optionally with a password and with TLS (a CA
// and a server certificate made in Go for the test). The server is the
// test's own process, stopped by its PID when the test ends; Stop and
// Restart (same port, same directory) make the outages the fleet tests
// need. Without redis-server the test skips (and fails under CI=true:
// scripts/deps.sh installs it).
//
// StartCluster runs a Redis Cluster the same way: n primaries without
// replicas (cluster-enabled, free ports for both the client port and
// cluster-port, nodes.conf in each primary's directory), the slots split
// evenly in order and assigned with CLUSTER ADDSLOTSRANGE, joined with
// CLUSTER MEET, and returns once every primary says cluster_state:ok.
// cluster-node-timeout is 1 s, so that an outage is seen within a test.
// A primary's Stop and Restart keep its nodes.conf: it rejoins with the
// same identity and slots (without Persist, empty). With TLS, every
// primary has the one certificate, for 127.0.0.1, and the bus is TLS too
// (tls-cluster; the certificate serves as the bus's client certificate).
//
// Boundaries: test code only. It starts one redis-server per call (per
// primary for a cluster), on loopback, and never touches a Redis it did
// not start.
package redistest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/logjail/logjail/internal/testenv"
)

// Options says how a Server runs. The zero value is a plain Redis without
// password and without persistence.
type Options struct {
	Password string // --requirepass
	TLS      bool   // --tls-port only (--port 0), certificate made for 127.0.0.1
	Persist  bool   // --appendonly yes (fsync always): a Restart keeps the data
}

// Server is a running redis-server.
type Server struct {
	t    testing.TB
	bin  string
	dir  string
	opts Options
	port int
	bus  int    // the cluster bus port (a Cluster's node), else 0
	tls  string // the directory of server.pem and server.key (TLS only)
	// CAFile is the PEM CA that signed the server's certificate (TLS only).
	CAFile string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	out  *testenv.Buffer
}

// Start starts redis-server with opts and returns once it answers PING.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	bin := testenv.Need(t, "redis-server")[0]
	s := &Server{t: t, bin: bin, dir: t.TempDir(), opts: opts}
	if opts.TLS {
		s.CAFile, s.tls = testenv.WriteCerts(t, s.dir).CA, s.dir
	}
	s.startFree(false)
	return s
}

// startFree starts s on free ports (a cluster bus port too when bus),
// trying other ports while the chosen one is taken meanwhile.
func (s *Server) startFree(bus bool) {
	t := s.t
	t.Helper()
	var err error
	for attempt := 1; attempt <= 5; attempt++ {
		s.port = testenv.FreePort(t)
		if bus {
			s.bus = testenv.FreePort(t)
		}
		if err = s.start(); err == nil {
			t.Cleanup(s.Stop)
			return
		}
		if !strings.Contains(err.Error(), "Address already in use") {
			break
		}
	}
	t.Fatal(err)
}

// URL is the server's address as the fleet configuration writes it:
// redis:// or rediss://, with the password when there is one.
func (s *Server) URL() string {
	u := url.URL{Scheme: "redis", Host: s.Addr(), Path: "/0"}
	if s.opts.TLS {
		u.Scheme = "rediss"
	}
	if s.opts.Password != "" {
		u.User = url.UserPassword("", s.opts.Password)
	}
	return u.String()
}

// Addr is host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Client returns a client of the server (closed at the test's end).
func (s *Server) Client(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(s.options())
	t.Cleanup(func() { c.Close() })
	return c
}

// CPU is the CPU time the server has used so far (INFO cpu: user + sys),
// for benchmarks that report Redis's cost per key.
func (s *Server) CPU(t testing.TB) time.Duration {
	t.Helper()
	info, err := s.Client(t).Info(context.Background(), "cpu").Result()
	if err != nil {
		t.Fatal(err)
	}
	var sec float64
	for _, l := range strings.Split(info, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(l), ":")
		if k == "used_cpu_user" || k == "used_cpu_sys" {
			f, _ := strconv.ParseFloat(v, 64)
			sec += f
		}
	}
	return time.Duration(sec * float64(time.Second))
}

func (s *Server) options() *redis.Options {
	o := &redis.Options{Addr: s.Addr(), Password: s.opts.Password, MaxRetries: -1, Protocol: 2,
		DialTimeout: 2 * time.Second, ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second}
	if s.opts.TLS {
		pool := x509.NewCertPool()
		pem, err := os.ReadFile(s.CAFile)
		if err != nil {
			s.t.Fatal(err)
		}
		pool.AppendCertsFromPEM(pem)
		o.TLSConfig = &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
	}
	return o
}

func (s *Server) start() error {
	args := []string{"--bind", "127.0.0.1", "--dir", s.dir, "--save", "", "--daemonize", "no",
		"--logfile", "", "--protected-mode", "no"}
	if s.opts.TLS {
		args = append(args, "--port", "0", "--tls-port", strconv.Itoa(s.port),
			"--tls-cert-file", filepath.Join(s.tls, "server.pem"), "--tls-key-file", filepath.Join(s.tls, "server.key"),
			"--tls-ca-cert-file", s.CAFile, "--tls-auth-clients", "no")
	} else {
		args = append(args, "--port", strconv.Itoa(s.port))
	}
	if s.opts.Password != "" {
		args = append(args, "--requirepass", s.opts.Password, "--masterauth", s.opts.Password)
	}
	if s.bus != 0 {
		// nodes.conf stays in s.dir: a Restart rejoins with the same
		// identity and slots.
		args = append(args, "--cluster-enabled", "yes", "--cluster-port", strconv.Itoa(s.bus),
			"--cluster-config-file", filepath.Join(s.dir, "nodes.conf"),
			"--cluster-node-timeout", strconv.Itoa(int(clusterNodeTimeout/time.Millisecond)))
		if s.opts.TLS {
			args = append(args, "--tls-cluster", "yes")
		}
	}
	if s.opts.Persist {
		args = append(args, "--appendonly", "yes", "--appendfsync", "always")
	} else {
		args = append(args, "--appendonly", "no")
	}
	cmd := exec.Command(s.bin, args...)
	out := &testenv.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	s.mu.Lock()
	s.cmd, s.done, s.out = cmd, done, out
	s.mu.Unlock()

	c := redis.NewClient(s.options())
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond) // a poll of the server, not a pause
	defer tick.Stop()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("redis-server exited: %s", out.String())
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			s.Stop()
			return fmt.Errorf("redis-server did not answer PING in 10s (%v): %s", err, out.String())
		}
	}
}

// Stop ends the server by its PID (SIGTERM, then SIGKILL after 5 s) and
// waits for it; stopping a stopped server does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		cmd.Process.Kill()
		<-done
	}
}

// Restart starts the server again on the same port and directory (after
// Stop, or stopping it first): with Persist it reloads its data, without
// it starts empty.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	var err error
	// The port was just released; another process may take it meanwhile,
	// which the test cannot help: it fails saying so.
	for attempt := 0; attempt < 5; attempt++ {
		if err = s.start(); err == nil {
			return
		}
	}
	s.t.Fatalf("redistest: restart on port %d: %v", s.port, err)
}

// Log returns what the server wrote.
func (s *Server) Log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.out == nil {
		return ""
	}
	return s.out.String()
}
