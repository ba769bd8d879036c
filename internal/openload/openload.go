// Package openload is an open-loop HTTP load generator for the decision
// endpoint's benchmark (scripts/bench-endpoint.sh, issue 23's row 3):
// requests are sent at a fixed rate whatever the server does, and each
// one's latency is measured from the moment it was scheduled to be sent,
// not from when it was written, so that a server that stalls is charged
// for every request that fell due during the stall (no coordinated
// omission, which a closed-loop client such as wrk without -R has: its
// connections stop sending while they wait, and only the one request in
// flight on each sees the stall).
//
// How it sends. Request i is due at start + i/Rate. One goroutine, locked
// to its own thread with a timer slack of 1 ns, sleeps to each due time
// with nanosleep (Go's own timers wake to the millisecond when the process
// is idle: 1 ms of the generator's lag would be ten times the idle latency
// it measures) and hands the request to the pool of Conns keep-alive
// connections; a connection sends its next request as soon as it is
// answered, so a slow answer delays the next send only when every
// connection is busy, and then the wait is counted, from the due time.
// The requests are plain HTTP/1.1 GETs on one host, written whole, with
// a header (Header) whose value rotates through Values (the clients the
// endpoint is asked about); an answer must carry Content-Length (fasthttp
// and net/http answers do), and a connection that breaks is dialled again,
// its request counted as an error.
//
// What it reports (Result): how many requests were due, written to a
// connection and answered, the errors, the answers by status, and every
// request's due time and latency. A request still unanswered Drain after
// the last due time is not answered; its latency is the time from its due
// time to then, a lower bound, and it counts in the percentiles, so a
// server that stops answering shows as a tail, not as a gap. Lag is how
// late the sender itself was for each request (its own scheduling, not
// the server's): its tail says whether the generator kept its rate.
//
// Boundaries: It measures and reports; it imports nothing of logjail's.
// Its main is internal/cmd/openload.
package openload

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Options configure Run.
type Options struct {
	// URL is the target, http://HOST:PORT/PATH (plain HTTP only).
	URL string
	// Rate is how many requests are due a second.
	Rate float64
	// Duration is how long requests fall due.
	Duration time.Duration
	// Conns is the number of keep-alive connections (default 64).
	Conns int
	// Header, when set, is sent with every request, its value taken in
	// turn from Values (the clients asked about).
	Header string
	Values []string
	// Drain is how long answers are waited for after the last due time
	// (default 2 s).
	Drain time.Duration
}

// Sample is one request.
type Sample struct {
	Due      time.Time     // when it was due to be sent
	Lag      time.Duration // how late the sender handed it on (its own lateness)
	Latency  time.Duration // from Due to the end of the answer (unanswered: to the end of Drain)
	Status   int           // the answer's status; 0 when unanswered
	Sent     bool          // written to a connection
	Answered bool
}

// Result is what one Run measured.
type Result struct {
	Due, Sent, Answered, Errors int
	Status                      map[int]int // answers by status code
	Samples                     []Sample    // in due order
	Elapsed                     time.Duration
	sorted, lags                []time.Duration
}

// Percentile is the latency at or under which p percent of the due
// requests were answered (unanswered ones at their lower bound).
func (r *Result) Percentile(p float64) time.Duration { return pct(r.sorted, p) }

// LagPercentile is the sender's own lateness at percentile p.
func (r *Result) LagPercentile(p float64) time.Duration { return pct(r.lags, p) }

func pct(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p / 100 * float64(len(sorted)))
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// Line is the result as one line of key=value pairs (milliseconds),
// which scripts read.
func (r *Result) Line(o Options) string {
	ms := func(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e6, 'f', 4, 64) }
	var b bytes.Buffer
	fmt.Fprintf(&b, "openload rate=%g duration_s=%g conns=%d due=%d sent=%d answered=%d errors=%d", o.Rate, o.Duration.Seconds(), o.conns(), r.Due, r.Sent, r.Answered, r.Errors)
	fmt.Fprintf(&b, " p50_ms=%s p90_ms=%s p99_ms=%s p999_ms=%s max_ms=%s lag_p99_ms=%s lag_max_ms=%s",
		ms(r.Percentile(50)), ms(r.Percentile(90)), ms(r.Percentile(99)), ms(r.Percentile(99.9)), ms(r.Percentile(100)), ms(r.LagPercentile(99)), ms(r.LagPercentile(100)))
	codes := make([]int, 0, len(r.Status))
	for c := range r.Status {
		codes = append(codes, c)
	}
	slices.Sort(codes)
	for _, c := range codes {
		fmt.Fprintf(&b, " status_%d=%d", c, r.Status[c])
	}
	return b.String()
}

func (o Options) conns() int {
	if o.Conns <= 0 {
		return 64
	}
	return o.Conns
}

// job is one due request handed to a connection.
type job struct {
	i   int
	due time.Time
}

// Run sends the requests and waits for their answers (at most Drain after
// the last due time, or until ctx is done).
func Run(ctx context.Context, o Options) (*Result, error) {
	if o.Rate <= 0 || o.Duration <= 0 {
		return nil, fmt.Errorf("openload: rate %g and duration %s must be positive", o.Rate, o.Duration)
	}
	u, err := url.Parse(o.URL)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return nil, fmt.Errorf("openload: url %q: want http://HOST:PORT/PATH", o.URL)
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "80")
	}
	path := u.RequestURI()
	reqs := requests(u.Host, path, o.Header, o.Values)
	drain := o.Drain
	if drain <= 0 {
		drain = 2 * time.Second
	}
	n := int(o.Rate * o.Duration.Seconds())
	if n < 1 {
		return nil, fmt.Errorf("openload: rate %g for %s is no request", o.Rate, o.Duration)
	}
	res := &Result{Due: n, Status: map[int]int{}, Samples: make([]Sample, n)}
	interval := time.Duration(float64(time.Second) / o.Rate)

	// Every connection dials first: the first requests do not pay for it.
	conns := make([]*conn, o.conns())
	for i := range conns {
		c, err := dial(host)
		if err != nil {
			for _, c := range conns[:i] {
				c.close()
			}
			return nil, fmt.Errorf("openload: %w", err)
		}
		conns[i] = c
	}
	jobs := make(chan job, n)
	var mu sync.Mutex // guards res.Sent, res.Answered, res.Errors, res.Status and the samples' answers
	var wg sync.WaitGroup
	stop := make(chan struct{})
	done := make(chan struct{}) // closed once every request is answered or failed
	for _, c := range conns {
		wg.Go(func() {
			defer c.close()
			for {
				var j job
				select {
				case j = <-jobs:
				case <-stop:
					return
				}
				status, err := c.do(host, reqs[j.i%len(reqs)], func() {
					mu.Lock()
					res.Samples[j.i].Sent = true
					res.Sent++
					mu.Unlock()
				})
				end := time.Now()
				if err != nil {
					select {
					case <-stop:
						return // closed by Run: not the server's error
					default:
					}
				}
				mu.Lock()
				if err != nil {
					res.Errors++
				} else {
					s := &res.Samples[j.i]
					s.Answered, s.Status, s.Latency = true, status, end.Sub(j.due)
					res.Answered++
					res.Status[status]++
				}
				if res.Answered+res.Errors == n {
					close(done)
				}
				mu.Unlock()
				if err != nil {
					c.redial(host) // the next request finds out if it failed
				}
			}
		})
	}

	start := time.Now().Add(10 * time.Millisecond)
	lags := pace(ctx, start, interval, n, func(i int, due time.Time) {
		res.Samples[i].Due = due
		jobs <- job{i, due} // never blocks: room for every request
	})
	last := start.Add(time.Duration(n) * interval)
	deadline := time.NewTimer(time.Until(last.Add(drain)))
	defer deadline.Stop()
	select {
	case <-done:
	case <-deadline.C:
	case <-ctx.Done():
	}
	end := time.Now()
	close(stop)
	for _, c := range conns {
		c.close() // unblocks a connection waiting for an answer
	}
	wg.Wait()
	res.Elapsed = end.Sub(start)
	res.sorted = make([]time.Duration, 0, n)
	for i := range res.Samples {
		s := &res.Samples[i]
		if s.Due.IsZero() { // not yet due when ctx ended
			continue
		}
		if !s.Answered {
			s.Latency = end.Sub(s.Due)
		}
		res.sorted = append(res.sorted, s.Latency)
	}
	slices.Sort(res.sorted)
	slices.Sort(lags)
	res.lags = lags
	return res, ctx.Err()
}

// requests are the requests' bytes, one for each header value.
func requests(host, path, header string, values []string) [][]byte {
	if header == "" || len(values) == 0 {
		return [][]byte{fmt.Appendf(nil, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", path, host)}
	}
	out := make([][]byte, len(values))
	for i, v := range values {
		out[i] = fmt.Appendf(nil, "GET %s HTTP/1.1\r\nHost: %s\r\n%s: %s\r\n\r\n", path, host, header, v)
	}
	return out
}

// pace calls send(i, due) for i in [0, n) at start + i×interval, each as
// close to its due time as the kernel wakes a thread (nanosleep with a
// timer slack of 1 ns, on a thread of its own), and returns how late each
// call was. It stops early when ctx is done.
func pace(ctx context.Context, start time.Time, interval time.Duration, n int, send func(int, time.Time)) []time.Duration {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	// PR_SET_TIMERSLACK (29) for this thread: the default 50 µs would add
	// up to 50 µs to every wake-up.
	syscall.RawSyscall(syscall.SYS_PRCTL, 29, 1, 0)
	lags := make([]time.Duration, 0, n)
	for i := range n {
		if i%256 == 0 && ctx.Err() != nil {
			break
		}
		due := start.Add(time.Duration(i) * interval)
		for {
			wait := time.Until(due)
			if wait <= 0 {
				break
			}
			ts := syscall.NsecToTimespec(int64(wait))
			syscall.Nanosleep(&ts, nil) // an interrupted sleep is resumed by the loop
		}
		lags = append(lags, time.Since(due))
		send(i, due)
	}
	return lags
}

// conn is one keep-alive connection.
type conn struct {
	mu sync.Mutex // guards nc against close from Run while do reads
	nc net.Conn
	r  *bufio.Reader
}

func dial(host string) (*conn, error) {
	nc, err := net.Dial("tcp", host)
	if err != nil {
		return nil, err
	}
	return &conn{nc: nc, r: bufio.NewReaderSize(nc, 4096)}, nil
}

func (c *conn) redial(host string) {
	c.close()
	nc, err := net.Dial("tcp", host)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		return
	}
	c.nc = nc
	c.r.Reset(nc)
}

func (c *conn) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.nc != nil {
		c.nc.Close()
	}
}

// errAnswer is a malformed answer.
var errAnswer = errors.New("malformed answer")

// do writes req, calls sent, and reads the answer: its status.
func (c *conn) do(host string, req []byte, sent func()) (int, error) {
	c.mu.Lock()
	nc := c.nc
	c.mu.Unlock()
	if _, err := nc.Write(req); err != nil {
		return 0, err
	}
	sent()
	line, err := c.r.ReadSlice('\n')
	if err != nil {
		return 0, err
	}
	// HTTP/1.1 200 OK
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) {
		return 0, fmt.Errorf("%w: status line %q", errAnswer, line)
	}
	status, err := strconv.Atoi(string(line[9:12]))
	if err != nil {
		return 0, fmt.Errorf("%w: status line %q", errAnswer, line)
	}
	length, closing := -1, false
	for {
		h, err := c.r.ReadSlice('\n')
		if err != nil {
			return 0, err
		}
		h = bytes.TrimRight(h, "\r\n")
		if len(h) == 0 {
			break
		}
		name, value, ok := bytes.Cut(h, []byte(":"))
		if !ok {
			return 0, fmt.Errorf("%w: header %q", errAnswer, h)
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if length, err = strconv.Atoi(string(value)); err != nil || length < 0 {
				return 0, fmt.Errorf("%w: Content-Length %q", errAnswer, value)
			}
		case bytes.EqualFold(name, []byte("Connection")) && bytes.EqualFold(value, []byte("close")):
			closing = true
		}
	}
	if length < 0 {
		return 0, fmt.Errorf("%w: no Content-Length", errAnswer)
	}
	if _, err := c.r.Discard(length); err != nil {
		return 0, err
	}
	if closing { // answered; the next request needs a new connection
		c.redial(host)
	}
	return status, nil
}
