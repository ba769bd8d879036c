package goodbots

import (
	"context"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/logjail/logjail/internal/dnstest"
)

func TestVerifyRanges(t *testing.T) {
	v := NewVerifier(Options{})
	defer v.Close()
	for _, c := range []struct {
		addr, crawler string
		want          Verdict
	}{
		{"66.249.66.1", "googlebot", Verified},
		{"::ffff:66.249.66.1", "googlebot", Verified},
		{"2001:4860:4801:10::1", "googlebot", Verified},
		{"66.249.66.1", "bingbot", Unverified}, // Google's address, claiming Bing
		{"157.55.39.1", "bingbot", Verified},
		{"17.241.208.161", "applebot", Verified},
		{"203.0.113.9", "googlebot", Unverified},   // a fake Googlebot
		{"203.0.113.9", "yandexbot", Unverified},   // DNS only, and no DNS here
		{"66.249.66.1", "uptimerobot", Unverified}, // a monitor is never verified
		{"66.249.66.1", "nosuchbot", Unverified},
	} {
		if got := v.Verify(netip.MustParseAddr(c.addr), c.crawler); got != c.want {
			t.Errorf("Verify(%s, %s) = %v, want %v", c.addr, c.crawler, got, c.want)
		}
	}
	if v.DNS() || v.Stats().Lookups != 0 {
		t.Errorf("a Verifier without a Resolver: DNS %v, %d lookups", v.DNS(), v.Stats().Lookups)
	}
	// DuckDuckBot publishes single addresses.
	ddg := Bots()[builtin().byName["duckduckbot"]].Ranges[0]
	if got := v.Verify(ddg.Addr(), "duckduckbot"); got != Verified {
		t.Errorf("Verify(%s, duckduckbot) = %v", ddg.Addr(), got)
	}
	if got := v.Verify(ddg.Addr().Next(), "duckduckbot"); ddg.Bits() == 32 && got != Unverified {
		t.Errorf("Verify(%s, duckduckbot) = %v: the next address is not published", ddg.Addr().Next(), got)
	}
}

func TestVerifyAllocs(t *testing.T) {
	v := NewVerifier(Options{})
	a := netip.MustParseAddr("66.249.66.1")
	if n := testing.AllocsPerRun(100, func() { v.Verify(a, "googlebot") }); n != 0 {
		t.Errorf("Verify: %v allocations", n)
	}
}

// clock is a settable clock for the cache's TTLs.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// verifySettled asks v, lets the lookup finish, and asks again.
func verifySettled(t *testing.T, v *Verifier, addr, crawler string) (first, then Verdict) {
	t.Helper()
	a := netip.MustParseAddr(addr)
	first = v.Verify(a, crawler)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := v.Settle(ctx); err != nil {
		t.Fatalf("lookup of %s did not finish: %v", addr, err)
	}
	return first, v.Verify(a, crawler)
}

func TestVerifyDNS(t *testing.T) {
	s := dnstest.Start(t,
		// Forward-confirmed: the PTR is Google's and its A leads back.
		"--ptr-record=5.113.0.203.in-addr.arpa,crawl-203-0-113-5.googlebot.com",
		"--host-record=crawl-203-0-113-5.googlebot.com,203.0.113.5",
		// The PTR says googlebot.com, but the name resolves elsewhere.
		"--ptr-record=6.113.0.203.in-addr.arpa,crawl-203-0-113-6.googlebot.com",
		"--host-record=crawl-203-0-113-6.googlebot.com,203.0.113.66",
		// A PTR in another domain that does lead back.
		"--ptr-record=7.113.0.203.in-addr.arpa,crawl-203-0-113-7.googlebot.com.example.net",
		"--host-record=crawl-203-0-113-7.googlebot.com.example.net,203.0.113.7",
		// IPv6, forward-confirmed.
		"--ptr-record=5.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa,crawl-v6.googlebot.com",
		"--host-record=crawl-v6.googlebot.com,2001:db8::5",
	)
	clk := &clock{t: time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)}
	v := NewVerifier(Options{Resolver: s.Resolver(), Now: clk.Now, Timeout: 5 * time.Second})
	defer v.Close()
	if !v.DNS() {
		t.Fatal("DNS() = false with a Resolver")
	}
	for _, c := range []struct {
		name, addr string
		want       Verdict
	}{
		{"forward-confirmed", "203.0.113.5", Verified},
		{"forward does not match", "203.0.113.6", Unverified},
		{"other domain", "203.0.113.7", Unverified},
		{"NXDOMAIN", "203.0.113.8", Unverified},
		{"IPv6 forward-confirmed", "2001:db8::5", Verified},
	} {
		t.Run(c.name, func(t *testing.T) {
			first, then := verifySettled(t, v, c.addr, "googlebot")
			if first != Pending {
				t.Errorf("first Verify = %v, want pending (the lookup never blocks the caller)", first)
			}
			if then != c.want {
				t.Errorf("after the lookup: %v, want %v\ndnsmasq:\n%s", then, c.want, s.Log())
			}
		})
	}
	// The forward lookup of the mismatched name was made: the verdict is
	// the forward check's, not the PTR's.
	if n := s.Queries("A", "crawl-203-0-113-6.googlebot.com"); n == 0 {
		t.Errorf("no forward query for crawl-203-0-113-6.googlebot.com:\n%s", s.Log())
	}
	// The other domain's name is never looked up forward.
	if n := s.Queries("A", "crawl-203-0-113-7.googlebot.com.example.net"); n != 0 {
		t.Errorf("%d forward queries for a name outside googlebot.com's domains", n)
	}

	// Cached: asking again makes no query.
	ptr := "5.113.0.203.in-addr.arpa"
	before, lookups := s.Queries("PTR", ptr), v.Stats().Lookups
	if before != 1 {
		t.Errorf("%d PTR queries for %s, want 1", before, ptr)
	}
	for range 100 {
		if got := v.Verify(netip.MustParseAddr("203.0.113.5"), "googlebot"); got != Verified {
			t.Fatalf("cached: %v", got)
		}
		if got := v.Verify(netip.MustParseAddr("203.0.113.8"), "googlebot"); got != Unverified {
			t.Fatalf("cached negative: %v", got)
		}
	}
	if after := s.Queries("PTR", ptr); after != before || v.Stats().Lookups != lookups {
		t.Errorf("cache hits made queries: PTR %d -> %d, lookups %d -> %d", before, after, lookups, v.Stats().Lookups)
	}
	// With the server gone, the cache still answers...
	s.Stop()
	if got := v.Verify(netip.MustParseAddr("203.0.113.5"), "googlebot"); got != Verified {
		t.Errorf("cached after the server stopped: %v", got)
	}
	// ...until the answer's TTL passes: then a new lookup, which fails, is
	// no verification (and is retried after ErrorTTL, not NegativeTTL).
	clk.Add(DefaultPositiveTTL + time.Second)
	first, then := verifySettled(t, v, "203.0.113.5", "googlebot")
	if first != Pending || then != Unverified {
		t.Errorf("expired, server gone: %v then %v, want pending then unverified", first, then)
	}
	clk.Add(DefaultErrorTTL + time.Second)
	if got := v.Verify(netip.MustParseAddr("203.0.113.5"), "googlebot"); got != Pending {
		t.Errorf("after ErrorTTL: %v, want pending (a new lookup)", got)
	}
}

// A Verifier never has more than MaxLookups under way, and the caller
// never waits: a resolver that hangs until the test ends proves it.
func TestVerifyBounded(t *testing.T) {
	r := &hangingResolver{release: make(chan struct{})}
	v := NewVerifier(Options{Resolver: r, MaxLookups: 2, Timeout: time.Minute})
	for i := range 10 {
		a := netip.AddrFrom4([4]byte{203, 0, 113, byte(10 + i)})
		if got := v.Verify(a, "googlebot"); got != Pending {
			t.Errorf("Verify(%s) = %v, want pending", a, got)
		}
	}
	if n := v.Stats().Lookups; n != 2 {
		t.Errorf("%d lookups started, want 2 (MaxLookups)", n)
	}
	close(r.release)
	v.Close()
	// After Close no lookup starts.
	if got := v.Verify(netip.MustParseAddr("203.0.113.99"), "googlebot"); got != Pending || v.Stats().Lookups != 2 {
		t.Errorf("after Close: %v, %d lookups", got, v.Stats().Lookups)
	}
}

// hangingResolver answers nothing until released or cancelled. It stands
// for a DNS server that does not answer: the edge a real one cannot show
// on demand.
type hangingResolver struct{ release chan struct{} }

func (h *hangingResolver) LookupAddr(ctx context.Context, addr string) ([]string, error) {
	select {
	case <-h.release:
	case <-ctx.Done():
	}
	return nil, &net.DNSError{Err: "timeout", Name: addr, IsTimeout: true}
}

func (h *hangingResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}
