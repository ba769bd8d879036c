package endpoint

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/logjail/logjail/actions"
)

// envHelper runs the test binary as a process of TestNotStarved, with a
// file descriptor budget of its own: the endpoint ("serve FDS MAXCONNS")
// or a part of the attack ("attack ADDR IDLE SLOW SRC").
const envHelper = "LOGJAIL_ENDPOINT_HELPER"

func TestMain(m *testing.M) {
	if v := os.Getenv(envHelper); v != "" {
		var mode string
		fmt.Sscan(v, &mode)
		if mode == "attack" {
			os.Exit(helperAttack(v))
		}
		os.Exit(helperServe(v))
	}
	os.Exit(m.Run())
}

// helperAttack opens IDLE connections that send nothing and SLOW that
// send half a request's headers, from 127.0.0.SRC up, for 30 s at most,
// prints how many it holds and how many it could not open, and holds
// them until stdin closes.
func helperAttack(spec string) int {
	var mode, addr string
	var idle, slow, src int
	if _, err := fmt.Sscan(spec, &mode, &addr, &idle, &slow, &src); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	var mu sync.Mutex
	var conns []net.Conn
	failed := 0
	var wg sync.WaitGroup
	jobs := make(chan int)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(src+w%4))}}
			for i := range jobs {
				c, err := d.DialContext(ctx, "tcp", addr)
				if err == nil && i >= idle {
					// Slowloris: a request line and half a header, never
					// finished.
					_, err = io.WriteString(c, "GET /auth HTTP/1.1\r\nHost: logjail\r\nX-Forwarded-F")
				}
				mu.Lock()
				if err != nil {
					failed++
				} else {
					conns = append(conns, c)
				}
				mu.Unlock()
			}
		}()
	}
	for i := range idle + slow {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	fmt.Println(len(conns), failed)
	io.Copy(io.Discard, os.Stdin)
	return 0
}

// helperServe is the endpoint process: RLIMIT_NOFILE lowered to the
// budget in spec ("FDS MAXCONNS"), the endpoint on a free loopback port
// (printed on stdout), 198.51.100.7 banned; it serves until stdin closes,
// then prints its Stats as JSON.
func helperServe(spec string) int {
	var mode string
	var fds, maxConns int
	if _, err := fmt.Sscan(spec, &mode, &fds, &maxConns); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: uint64(fds), Max: uint64(fds)}); err != nil {
		fmt.Fprintln(os.Stderr, "setrlimit:", err)
		return 2
	}
	bans := NewBans("endpoint")
	bans.Sync(context.Background(), []actions.Entry{{Prefix: netip.MustParsePrefix("198.51.100.7/32"), Kind: actions.KindBan,
		Until: time.Now().Add(time.Hour), Rule: "flood", Key: "198.51.100.7"}}, nil)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	// Timeouts far beyond the test: only the connection limit and the
	// descriptor budget decide who stays.
	s := NewServer(Config{Trusted: loopback, MaxConns: maxConns, ReadTimeout: 10 * time.Minute, IdleTimeout: 10 * time.Minute}, bans, nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, l) }()
	fmt.Println(l.Addr())
	io.Copy(io.Discard, os.Stdin)
	st := s.Stats()
	cancel()
	if err := <-done; err != nil {
		fmt.Fprintln(os.Stderr, "serve:", err)
		return 1
	}
	json.NewEncoder(os.Stdout).Encode(st)
	return 0
}

// TestNotStarved: 20,000 idle connections and 5,000 slowloris clients
// (half-sent headers, never finished) against an endpoint whose process
// has 1,024 file descriptors (accept fails with EMFILE again and again),
// or whose max_conns is 1,000; the endpoint closes the connections
// longest without a request to go on. Meanwhile and afterwards an
// ordinary client, a new connection a request as nginx's auth_request
// makes them, gets every answer right (403 banned, 200 not), with a p99
// latency of at most 50 ms.
func TestNotStarved(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 25,000 connections")
	}
	t.Run("descriptors", func(t *testing.T) { testNotStarved(t, "serve 1024 100000", true) })
	t.Run("max_conns", func(t *testing.T) { testNotStarved(t, "serve 8192 1000", false) })
}

// testNotStarved runs the attack against the endpoint process of spec;
// emfile: it must have run out of descriptors, else never.
func testNotStarved(t *testing.T, spec string, emfile bool) {
	const idle, slow = 20_000, 5_000
	srv, out := startHelper(t, spec)
	addr, err := out.ReadString('\n')
	if err != nil {
		t.Fatalf("the endpoint process: %v", err)
	}
	addr = addr[:len(addr)-1]

	var (
		mu      sync.Mutex
		samples []sample
		phase   = "before"
		errs    []string
	)
	tick := make(chan struct{}, 1) // a request was made
	stop := make(chan struct{})
	clientDone := make(chan struct{})
	go func() { // the ordinary client
		defer close(clientDone)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			client, want := "198.51.100.8", 200
			if i%2 == 0 {
				client, want = "198.51.100.7", 403
			}
			t0 := time.Now()
			code, err := authOnce(addr, client)
			d := time.Since(t0)
			mu.Lock()
			samples = append(samples, sample{phase, d})
			if err != nil || code != want {
				errs = append(errs, fmt.Sprintf("%s %s: %d %v, want %d", phase, client, code, err, want))
			}
			mu.Unlock()
			select {
			case tick <- struct{}{}:
			default:
			}
		}
	}()
	setPhase := func(p string) {
		mu.Lock()
		phase = p
		mu.Unlock()
	}

	// The attack: two processes (a process may hold 20,000 descriptors
	// here), from 127.0.0.2-127.0.0.9 (enough source ports).
	setPhase("during")
	var attackers []*helper
	for i := range 2 {
		a, _ := startHelper(t, fmt.Sprintf("attack %s %d %d %d", addr, idle/2, slow/2, 2+4*i))
		attackers = append(attackers, a)
	}
	open, failed := 0, 0
	for _, a := range attackers {
		var o, f int
		if _, err := fmt.Fscan(a.out, &o, &f); err != nil {
			t.Fatalf("an attacker: %v", err)
		}
		open, failed = open+o, failed+f
	}
	opened := time.Now()
	// Hold the attack a little longer, then end it.
	waitSamples(t, &mu, &samples, tick, "during", 200, opened.Add(2*time.Second))
	t.Logf("attack: %d connections opened, %d failed", open, failed)
	for _, a := range attackers {
		a.stop()
	}
	setPhase("after")
	waitSamples(t, &mu, &samples, tick, "after", 500, time.Now().Add(time.Second))
	close(stop)
	<-clientDone
	var st Stats
	srv.stdin.Close()
	if err := json.NewDecoder(out).Decode(&st); err != nil {
		t.Fatalf("the endpoint process's stats: %v", err)
	}
	srv.stop()

	mu.Lock()
	defer mu.Unlock()
	for _, e := range errs[:min(len(errs), 10)] {
		t.Error(e)
	}
	if len(errs) > 0 {
		t.Errorf("%d wrong or failed answers to the ordinary client", len(errs))
	}
	for _, p := range []string{"during", "after"} {
		var ds []time.Duration
		for _, s := range samples {
			if s.phase == p {
				ds = append(ds, s.d)
			}
		}
		slices.Sort(ds)
		if len(ds) == 0 {
			t.Errorf("%s: no request answered", p)
			continue
		}
		p50, p99 := ds[len(ds)/2], ds[len(ds)*99/100]
		t.Logf("%s the attack: %d requests, p50 %v, p99 %v, max %v", p, len(ds), p50, p99, ds[len(ds)-1])
		if p99 > 50*time.Millisecond {
			t.Errorf("%s the attack: p99 %v, want ≤ 50 ms", p, p99)
		}
	}
	t.Logf("endpoint: %d accepted, %d evicted, %d accept errors, %d connections held at the end", st.Accepted, st.Evicted, st.AcceptErrors, st.Conns)
	if st.Evicted == 0 || (st.AcceptErrors > 0) != emfile {
		t.Errorf("accept errors %d, evicted %d: the test did not test what it says (out of descriptors: %v)", st.AcceptErrors, st.Evicted, emfile)
	}
	if !st.Serving {
		t.Errorf("the endpoint no longer serves: %+v", st)
	}
}

// sample is one request of the ordinary client: its latency, and whether
// it was made before, during or after the attack.
type sample struct {
	phase string
	d     time.Duration
}

// waitSamples waits until the ordinary client has made n requests in
// phase (tick says it made one), and until the time until; a minute at
// most.
func waitSamples(t *testing.T, mu *sync.Mutex, samples *[]sample, tick <-chan struct{}, phase string, n int, until time.Time) {
	t.Helper()
	deadline := time.NewTimer(time.Minute)
	defer deadline.Stop()
	for {
		mu.Lock()
		k := 0
		for _, s := range *samples {
			if s.phase == phase {
				k++
			}
		}
		mu.Unlock()
		if k >= n && !time.Now().Before(until) {
			return
		}
		select {
		case <-tick:
		case <-deadline.C:
			t.Fatalf("%s: %d requests of the ordinary client in a minute", phase, k)
		}
	}
}

// authOnce asks /auth about client on a new connection, as nginx does.
func authOnce(addr, client string) (int, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := fmt.Fprintf(c, "GET /auth HTTP/1.1\r\nHost: logjail\r\nX-Forwarded-For: %s\r\nConnection: close\r\n\r\n", client); err != nil {
		return 0, err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return 0, err
	}
	var proto string
	var code int
	if _, err := fmt.Sscan(line, &proto, &code); err != nil {
		return 0, fmt.Errorf("status line %q: %w", line, err)
	}
	return code, nil
}

// helper is a process of the test binary in a helper mode.
type helper struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
	done  chan struct{}
}

// startHelper starts the test binary in the helper mode spec; it is
// stopped at the test's end if stop was not called.
func startHelper(t *testing.T, spec string) (*helper, *bufio.Reader) {
	t.Helper()
	h := &helper{cmd: exec.Command(os.Args[0], "-test.run", "^$"), done: make(chan struct{})}
	h.cmd.Env = append(os.Environ(), envHelper+"="+spec)
	var err error
	if h.stdin, err = h.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := h.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	h.out = bufio.NewReader(stdout)
	h.cmd.Stderr = os.Stderr
	if err := h.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.stop)
	return h, h.out
}

// stop closes the helper's stdin and waits for it to exit (killing it
// after 10 s).
func (h *helper) stop() {
	select {
	case <-h.done:
		return
	default:
	}
	h.stdin.Close()
	exited := make(chan struct{})
	go func() { h.cmd.Wait(); close(exited) }()
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		h.cmd.Process.Kill()
		<-exited
	}
	close(h.done)
}
