// Package dnstest runs a real DNS server for a test: dnsmasq on a free
// loopback port, answering only from the records the test gives it
// (NXDOMAIN for any other name in the zones it serves), logging every
// query so that a test can count them. The server is the test's own
// process, stopped by its PID when the test ends. Without dnsmasq the test
// skips (and fails under CI=true: scripts/deps.sh installs dnsmasq-base).
//
// Boundaries: test code only. It starts one dnsmasq per call, on loopback,
// and never touches the machine's resolver configuration.
package dnstest

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/logjail/logjail/internal/testenv"
)

// Server is a running dnsmasq.
type Server struct {
	cmd  *exec.Cmd
	port int
	mu   sync.Mutex
	log  []string
	// flushes numbers the names flush asks for.
	flushes int
	done    chan struct{}
	stop    sync.Once
}

// Zones are the zones a Server answers for from its records alone.
var zones = []string{"in-addr.arpa", "ip6.arpa", "googlebot.com", "google.com", "search.msn.com", "yandex.com", "example.net"}

// Start starts dnsmasq with records, dnsmasq options such as
// "--ptr-record=5.113.0.203.in-addr.arpa,crawl-203-0-113-5.googlebot.com"
// and "--host-record=crawl-203-0-113-5.googlebot.com,203.0.113.5". It
// returns once the server says it has started.
func Start(t testing.TB, records ...string) *Server {
	t.Helper()
	bin := testenv.Need(t, "dnsmasq")[0]
	// dnsmasq binds its port for UDP and TCP. A port free for both when
	// picked can be taken by another test process before dnsmasq binds it;
	// then dnsmasq exits with "Address already in use" and the next free
	// port is tried.
	var s *Server
	for attempt := 1; ; attempt++ {
		var err error
		s, err = start(t, bin, freePort(t), records)
		if err == nil {
			break
		}
		if attempt == 5 || !strings.Contains(err.Error(), "Address already in use") {
			t.Fatal(err)
		}
	}
	t.Cleanup(s.Stop)
	return s
}

// freePort returns a loopback port that was free for both UDP and TCP.
func freePort(t testing.TB) int {
	t.Helper()
	for i := 0; i < 20; i++ {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := pc.LocalAddr().(*net.UDPAddr).Port
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		pc.Close()
		if err != nil {
			continue
		}
		l.Close()
		return port
	}
	t.Fatal("no loopback port free for both UDP and TCP in 20 tries")
	return 0
}

// start runs dnsmasq on port and waits until it says it has started.
func start(t testing.TB, bin string, port int, records []string) (*Server, error) {
	args := []string{"--no-daemon", "--keep-in-foreground", "--conf-file=/dev/null", "--port=" + strconv.Itoa(port),
		"--listen-address=127.0.0.1", "--bind-interfaces", "--no-resolv", "--no-hosts", "--pid-file=",
		"--log-queries", "--log-facility=-", "--user=root"}
	for _, z := range zones {
		args = append(args, "--local=/"+z+"/")
	}
	args = append(args, records...)
	s := &Server{cmd: exec.Command(bin, args...), port: port, done: make(chan struct{})}
	stderr, err := s.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	started := make(chan struct{})
	go func() {
		defer close(s.done)
		sc := bufio.NewScanner(stderr)
		var once sync.Once
		for sc.Scan() {
			s.mu.Lock()
			s.log = append(s.log, sc.Text())
			s.mu.Unlock()
			if strings.Contains(sc.Text(), "started, version") {
				once.Do(func() { close(started) })
			}
		}
	}()
	select {
	case <-started:
		return s, nil
	case <-s.done:
		s.cmd.Wait()
		return nil, fmt.Errorf("dnsmasq exited: %s", s.Log())
	case <-time.After(10 * time.Second):
		s.Stop()
		return nil, fmt.Errorf("dnsmasq did not start in 10s: %s", s.Log())
	}
}

// Stop ends the server, by its PID; a second Stop does nothing.
func (s *Server) Stop() {
	s.stop.Do(func() {
		s.cmd.Process.Kill()
		<-s.done
		s.cmd.Wait()
	})
}

// Log returns what the server logged, queries included.
func (s *Server) Log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.log, "\n")
}

// Queries counts the logged queries of a type (PTR, A, AAAA) for name,
// once every query made before the call is in the log (see flush).
func (s *Server) Queries(typ, name string) int {
	s.flush()
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, l := range s.log {
		if strings.Contains(l, "query["+typ+"] "+name+" ") {
			n++
		}
	}
	return n
}

// flush returns once the server's log, as read so far, holds every query
// it answered before: it asks for a name of its own (in example.net,
// which the server answers NXDOMAIN) and waits for that query's line, which
// dnsmasq writes after the lines of the queries it answered earlier. An
// answer reaches the client before its line is read from dnsmasq's
// stderr, so a count taken at once could miss it.
func (s *Server) flush() {
	s.mu.Lock()
	s.flushes++
	name := "flush-" + strconv.Itoa(s.flushes) + ".example.net"
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s.Resolver().LookupHost(ctx, name)           // NXDOMAIN: the query is what counts
	tick := time.NewTicker(5 * time.Millisecond) // a poll of the log, not a pause
	defer tick.Stop()
	for {
		s.mu.Lock()
		seen := slices.ContainsFunc(s.log, func(l string) bool { return strings.Contains(l, " "+name+" ") })
		s.mu.Unlock()
		if seen {
			return
		}
		select {
		case <-ctx.Done():
			return // the count that follows says what is missing
		case <-tick.C:
		}
	}
}

// Resolver returns a net.Resolver (pure Go) that asks s only.
func (s *Server) Resolver() *net.Resolver {
	addr := "127.0.0.1:" + strconv.Itoa(s.port)
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}}
}
