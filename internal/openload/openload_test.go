package openload

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// stallServer is a real HTTP server on loopback that, at its stallAt-th
// request, stops answering every request for stall, and says when.
type stallServer struct {
	stallAt int
	stall   time.Duration

	gate       sync.RWMutex // write-locked while stalled
	mu         sync.Mutex
	n          int
	start, end time.Time // the stall, as the server saw it
}

func (s *stallServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.n++
	n := s.n
	s.mu.Unlock()
	if n == s.stallAt {
		s.gate.Lock()
		s.mu.Lock()
		s.start = time.Now()
		s.mu.Unlock()
		time.AfterFunc(s.stall, func() {
			s.mu.Lock()
			s.end = time.Now()
			s.mu.Unlock()
			s.gate.Unlock()
		})
	}
	s.gate.RLock() // waits out a stall
	s.gate.RUnlock()
	if r.Header.Get("X-Client") == "banned" {
		w.WriteHeader(http.StatusForbidden)
		return
	}
	w.Write([]byte("ok"))
}

// TestStallShowsAsLatency: a server that stops answering for 200 ms shows
// as latency of every request that fell due during the stall, each
// answered only after the stall's end, because the requests go on being
// sent at their rate (open loop) and are timed from their due time; a
// closed-loop client would have seen the stall in one request per
// connection.
func TestStallShowsAsLatency(t *testing.T) {
	const rate, stall = 1000, 200 * time.Millisecond
	s := &stallServer{stallAt: 300, stall: stall}
	srv := httptest.NewServer(s)
	defer srv.Close()
	res, err := Run(context.Background(), Options{
		URL: srv.URL + "/auth", Rate: rate, Duration: time.Second, Conns: 8,
		Header: "X-Client", Values: []string{"allowed", "banned"},
	})
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	start, end := s.start, s.end
	s.mu.Unlock()
	if start.IsZero() || end.IsZero() {
		t.Fatalf("the server did not stall (%d requests)", s.n)
	}
	if res.Due != rate || res.Sent != rate || res.Answered != rate || res.Errors != 0 {
		t.Fatalf("due %d, sent %d, answered %d, errors %d: want %d each and no error", res.Due, res.Sent, res.Answered, res.Errors, rate)
	}
	if res.Status[200] != rate/2 || res.Status[403] != rate/2 {
		t.Errorf("statuses %v: want %d of 200 and of 403", res.Status, rate/2)
	}
	during := 0
	for i, smp := range res.Samples {
		if smp.Due.Before(start) || smp.Due.After(end.Add(-2*time.Millisecond)) {
			continue
		}
		during++
		if got := smp.Due.Add(smp.Latency); got.Before(end) {
			t.Errorf("request %d, due %s into the stall, answered %s before its end: its latency %s leaves the stall out",
				i, smp.Due.Sub(start), end.Sub(got), smp.Latency)
		}
	}
	// The sender went on at its rate during the stall (not held back by
	// the busy connections): about rate × stall requests fell due in it.
	if want := int(0.9 * rate * (end.Sub(start) - 2*time.Millisecond).Seconds()); during < want {
		t.Errorf("%d requests due during the %s stall, want at least %d", during, end.Sub(start), want)
	}
	// A fifth of the requests waited out part of the stall: the tail
	// shows it (p99 about 190 ms, the longest the whole stall).
	if p99, mx := res.Percentile(99), res.Percentile(100); p99 < stall*8/10 || mx < end.Sub(start) {
		t.Errorf("p99 %s, max %s: want p99 ≥ %s and max ≥ the stall (%s)", p99, mx, stall*8/10, end.Sub(start))
	}
	if p50 := res.Percentile(50); p50 > 50*time.Millisecond {
		t.Errorf("p50 %s: the requests outside the stall should be answered at once", p50)
	}
	if line := res.Line(Options{Rate: rate, Duration: time.Second, Conns: 8}); !strings.Contains(line, "due=1000 sent=1000 answered=1000 errors=0") ||
		!strings.Contains(line, "status_200=500 status_403=500") {
		t.Errorf("line %q", line)
	}
}

// TestUnansweredCount: requests a server never answers are counted as
// due and not answered, and their latency (at least the drain) is in the
// tail, not left out.
func TestUnansweredCount(t *testing.T) {
	hang := make(chan struct{})
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		k := n
		mu.Unlock()
		if k > 100 {
			<-hang
		}
	}))
	defer srv.Close()
	defer close(hang) // before Close, which waits for the handlers
	const drain = 300 * time.Millisecond
	res, err := Run(context.Background(), Options{URL: srv.URL, Rate: 1000, Duration: 300 * time.Millisecond, Conns: 16, Drain: drain})
	if err != nil {
		t.Fatal(err)
	}
	if res.Due != 300 || res.Answered != 100 || res.Errors != 0 {
		t.Fatalf("due %d, answered %d, errors %d: want 300, 100, 0", res.Due, res.Answered, res.Errors)
	}
	// 16 connections hold the first 16 unanswered requests; the rest were
	// never written.
	if res.Sent != 116 {
		t.Errorf("sent %d, want 116 (100 answered and one waiting on each of 16 connections)", res.Sent)
	}
	if p := res.Percentile(50); p < drain {
		t.Errorf("p50 %s: two thirds of the requests were never answered, want at least the drain %s", p, drain)
	}
}

func TestOptions(t *testing.T) {
	for _, o := range []Options{
		{URL: "http://127.0.0.1:1/", Rate: 0, Duration: time.Second},
		{URL: "http://127.0.0.1:1/", Rate: 1, Duration: time.Millisecond},
		{URL: "https://127.0.0.1:1/", Rate: 10, Duration: time.Second},
		{URL: "127.0.0.1:1", Rate: 10, Duration: time.Second},
	} {
		if _, err := Run(context.Background(), o); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
}
