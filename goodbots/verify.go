package goodbots

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// Verdict says whether an address is a crawler's.
type Verdict int

// Verdicts.
const (
	Unverified Verdict = iota // not the crawler's, as far as the ranges and DNS tell (or an unknown crawler)
	Verified                  // in the crawler's published ranges, or its forward-confirmed reverse DNS is the crawler's
	Pending                   // a DNS lookup is under way (or could not start yet): for now, not the crawler's
)

func (v Verdict) String() string {
	switch v {
	case Verified:
		return "verified"
	case Pending:
		return "pending"
	}
	return "unverified"
}

// Resolver is what forward-confirmed reverse DNS asks: the PTR names of
// an address, and the addresses of a name. *net.Resolver satisfies it.
type Resolver interface {
	LookupAddr(ctx context.Context, addr string) ([]string, error)
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

var _ Resolver = (*net.Resolver)(nil)

// Defaults of Options.
const (
	DefaultPositiveTTL = 6 * time.Hour    // a verified address
	DefaultNegativeTTL = time.Hour        // an address DNS says is not the crawler's
	DefaultErrorTTL    = time.Minute      // a lookup that failed (timeout, SERVFAIL): tried again after this
	DefaultCacheSize   = 1 << 16          // cached (address, crawler) answers
	DefaultMaxLookups  = 16               // lookups under way at once
	DefaultTimeout     = 10 * time.Second // one verification (PTR, then forward lookups)
)

// Options configure a Verifier. The zero value is a Verifier of the
// published ranges only.
type Options struct {
	// Resolver, when set, verifies by forward-confirmed reverse DNS the
	// addresses of crawlers that publish DNS domains and that are not in
	// their published ranges. nil: published ranges only.
	Resolver Resolver
	// Now is the clock of the cache's TTLs. nil: time.Now.
	Now func() time.Time
	// PositiveTTL, NegativeTTL and ErrorTTL are how long an answer is
	// cached: verified, not verified, and a failed lookup. 0: the defaults.
	PositiveTTL, NegativeTTL, ErrorTTL time.Duration
	// CacheSize bounds the cached answers; 0: DefaultCacheSize.
	CacheSize int
	// MaxLookups bounds the lookups under way at once; 0: DefaultMaxLookups.
	MaxLookups int
	// Timeout bounds one verification; 0: DefaultTimeout.
	Timeout time.Duration
}

// Verifier says whether an address is a crawler's: by the crawler's
// published ranges, then, with a Resolver, by forward-confirmed reverse
// DNS, asynchronously (see the package doc). It is safe for concurrent
// use. A Verifier with a Resolver runs lookups until Close.
type Verifier struct {
	t      *table
	o      Options
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	cache    map[cacheKey]cacheEntry
	inflight int
	idle     chan struct{} // closed when inflight falls to 0; nil while 0
	wg       sync.WaitGroup
	queries  int // lookups started, for Stats
}

type cacheKey struct {
	addr netip.Addr
	bot  int
}

type cacheEntry struct {
	verdict Verdict // Pending while the lookup is under way
	until   time.Time
}

// NewVerifier returns a Verifier of the crawlers of bots.txt.
func NewVerifier(o Options) *Verifier {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.PositiveTTL <= 0 {
		o.PositiveTTL = DefaultPositiveTTL
	}
	if o.NegativeTTL <= 0 {
		o.NegativeTTL = DefaultNegativeTTL
	}
	if o.ErrorTTL <= 0 {
		o.ErrorTTL = DefaultErrorTTL
	}
	if o.CacheSize <= 0 {
		o.CacheSize = DefaultCacheSize
	}
	if o.MaxLookups <= 0 {
		o.MaxLookups = DefaultMaxLookups
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Verifier{t: builtin(), o: o, ctx: ctx, cancel: cancel, cache: map[cacheKey]cacheEntry{}}
}

// DNS reports whether v verifies by reverse DNS too (it has a Resolver).
func (v *Verifier) DNS() bool { return v.o.Resolver != nil }

// Verify says whether addr is the crawler's (a name Agent returns):
// Verified when addr is in the crawler's published ranges; else, without
// a Resolver or for a crawler without DNS domains, Unverified; else the
// cached answer of forward-confirmed reverse DNS; else Pending, and a
// lookup starts in the background (unless MaxLookups are under way: the
// next request of addr starts it). Verify never waits on the network.
// An unknown crawler is Unverified.
func (v *Verifier) Verify(addr netip.Addr, crawler string) Verdict {
	bi, ok := v.t.byName[crawler]
	if !ok || v.t.bots[bi].Kind != Crawler {
		return Unverified
	}
	addr = addr.Unmap().WithZone("")
	if r := v.t.ranges[bi]; r != nil && r.Contains(addr) {
		return Verified
	}
	if v.o.Resolver == nil || len(v.t.bots[bi].Domains) == 0 || !addr.IsValid() {
		return Unverified
	}
	k := cacheKey{addr, bi}
	now := v.o.Now()
	v.mu.Lock()
	defer v.mu.Unlock()
	if e, ok := v.cache[k]; ok && (e.verdict == Pending || now.Before(e.until)) {
		return e.verdict
	}
	if v.inflight >= v.o.MaxLookups || v.ctx.Err() != nil {
		return Pending
	}
	v.put(k, cacheEntry{verdict: Pending}, now)
	v.inflight++
	v.queries++
	if v.idle == nil {
		v.idle = make(chan struct{})
	}
	v.wg.Add(1)
	go v.lookup(k, v.t.bots[bi].Domains)
	return Pending
}

// put stores an answer; v.mu is held. A full cache first drops its
// expired answers, then, if still full, every answer but the lookups
// under way: it starts over, as rules.KeyCache does.
func (v *Verifier) put(k cacheKey, e cacheEntry, now time.Time) {
	if _, ok := v.cache[k]; !ok && len(v.cache) >= v.o.CacheSize {
		for ck, ce := range v.cache {
			if ce.verdict != Pending && !now.Before(ce.until) {
				delete(v.cache, ck)
			}
		}
		if len(v.cache) >= v.o.CacheSize {
			for ck, ce := range v.cache {
				if ce.verdict != Pending {
					delete(v.cache, ck)
				}
			}
		}
	}
	v.cache[k] = e
}

// lookup verifies k by forward-confirmed reverse DNS and caches the answer.
func (v *Verifier) lookup(k cacheKey, domains []string) {
	defer v.wg.Done()
	ctx, cancel := context.WithTimeout(v.ctx, v.o.Timeout)
	verdict, failed := fcrdns(ctx, v.o.Resolver, k.addr, domains)
	cancel()
	ttl := v.o.NegativeTTL
	switch {
	case verdict == Verified:
		ttl = v.o.PositiveTTL
	case failed:
		ttl = v.o.ErrorTTL
	}
	now := v.o.Now()
	v.mu.Lock()
	defer v.mu.Unlock()
	v.put(k, cacheEntry{verdict: verdict, until: now.Add(ttl)}, now)
	v.inflight--
	if v.inflight == 0 {
		close(v.idle)
		v.idle = nil
	}
}

// fcrdns is forward-confirmed reverse DNS: some PTR name of addr is under
// one of domains, and resolves back to addr. failed says an answer was
// not had (a timeout, a server failure) rather than negative.
func fcrdns(ctx context.Context, r Resolver, addr netip.Addr, domains []string) (v Verdict, failed bool) {
	names, err := r.LookupAddr(ctx, addr.String())
	if err != nil {
		return Unverified, !notFound(err)
	}
	for _, name := range names {
		name = strings.ToLower(strings.TrimSuffix(name, "."))
		if !underAny(name, domains) {
			continue
		}
		addrs, err := r.LookupNetIP(ctx, "ip", name+".")
		if err != nil {
			failed = failed || !notFound(err)
			continue
		}
		for _, a := range addrs {
			if a.Unmap().WithZone("") == addr {
				return Verified, false
			}
		}
	}
	return Unverified, failed
}

// notFound reports whether err is DNS saying no such name or record
// (rather than failing to answer).
func notFound(err error) bool {
	var de *net.DNSError
	return errors.As(err, &de) && de.IsNotFound
}

// underAny reports whether name is a subdomain of one of domains (not
// the domain itself: a crawler's PTR names a host under it).
func underAny(name string, domains []string) bool {
	for _, d := range domains {
		if len(name) > len(d)+1 && strings.HasSuffix(name, d) && name[len(name)-len(d)-1] == '.' {
			return true
		}
	}
	return false
}

// Settle waits until no lookup is under way, or ctx is done. A replay
// that resolves calls it to let answers arrive; tests call it instead of
// sleeping.
func (v *Verifier) Settle(ctx context.Context) error {
	v.mu.Lock()
	ch := v.idle
	v.mu.Unlock()
	if ch == nil {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Stats are a Verifier's counters.
type Stats struct {
	Lookups int // DNS verifications started
	Cached  int // answers held (lookups under way included)
}

// Stats returns v's counters.
func (v *Verifier) Stats() Stats {
	v.mu.Lock()
	defer v.mu.Unlock()
	return Stats{Lookups: v.queries, Cached: len(v.cache)}
}

// Close cancels the lookups under way and waits for them. Verify still
// answers from the ranges and the cache afterwards, and starts no lookup.
func (v *Verifier) Close() {
	v.mu.Lock()
	v.cancel() // under mu: Verify starts no lookup after it
	v.mu.Unlock()
	v.wg.Wait()
}
