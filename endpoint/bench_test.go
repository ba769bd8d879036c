package endpoint

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/logjail/logjail/actions"
	"github.com/valyala/fasthttp"
)

// benchBans is a view of 100,000 single-address bans (2001:db8::/32) and
// 1,000 /24 throttles.
func benchBans(b *testing.B) (*Bans, []string) {
	b.Helper()
	bans := NewBans("endpoint")
	until := time.Now().Add(time.Hour)
	var es []actions.Entry
	var clients []string
	for i := range 100_000 {
		a := netip.MustParseAddr(fmt.Sprintf("2001:db8:%x:%x::1", i>>16, i&0xffff))
		es = append(es, actions.Entry{Prefix: netip.PrefixFrom(a, 128), Kind: actions.KindBan, Until: until, Rule: "flood", Key: a.String()})
		if i%100 == 0 {
			clients = append(clients, a.String(), fmt.Sprintf("2001:db8:ffff:%x::1", i/100)) // banned, allowed
		}
	}
	for i := range 1000 {
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)}), 24).Masked()
		es = append(es, actions.Entry{Prefix: p, Kind: actions.KindThrottle, Until: until, Delay: 10 * time.Second, Rule: "heavy", Key: p.String()})
	}
	if err := bans.Sync(context.Background(), es, nil); err != nil {
		b.Fatal(err)
	}
	return bans, clients
}

// BenchmarkLookup: one /auth decision's lookup among 101,000 blocked
// prefixes.
func BenchmarkLookup(b *testing.B) {
	bans, clients := benchBans(b)
	addrs := make([]netip.Addr, len(clients))
	for i, c := range clients {
		addrs[i] = netip.MustParseAddr(c)
	}
	now := time.Now()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		bans.Lookup(addrs[i%len(addrs)], now)
	}
}

// BenchmarkAuth: the whole /auth handler (header parsing, client, lookup,
// answer) on fasthttp's request context, half the clients banned.
func BenchmarkAuth(b *testing.B) {
	bans, clients := benchBans(b)
	s := NewServer(Config{Trusted: Proxies{netip.MustParsePrefix("127.0.0.0/8")}}, bans, nil, nil)
	ctxs := make([]*fasthttp.RequestCtx, len(clients))
	for i, c := range clients {
		var req fasthttp.Request
		req.SetRequestURI("/auth")
		req.Header.Set("X-Forwarded-For", c)
		ctx := &fasthttp.RequestCtx{}
		ctx.Init(&req, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 4711}, nil)
		ctxs[i] = ctx
	}
	// The answers are the ones a proxy would get: half 403.
	codes := map[int]int{}
	for _, ctx := range ctxs {
		s.handle(ctx)
		codes[ctx.Response.StatusCode()]++
		ctx.Response.Reset()
	}
	if codes[403] != len(ctxs)/2 || codes[200] != len(ctxs)/2 {
		b.Fatalf("answers %v, want half 200 and half 403", codes)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		ctx := ctxs[i%len(ctxs)]
		ctx.Response.Reset()
		s.handle(ctx)
	}
}

// BenchmarkApply: one change (a new ban) applied to the view of 101,000
// prefixes: the copy-on-write of the path to it and the atomic swap that
// keeps lookups lock-free.
func BenchmarkApply(b *testing.B) {
	bans, _ := benchBans(b)
	until := time.Now().Add(time.Hour)
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		a := netip.AddrFrom4([4]byte{203, 0, 113, byte(i)})
		c := actions.Change{Entry: actions.Entry{Prefix: netip.PrefixFrom(a, 32), Kind: actions.KindBan, Until: until, Rule: "flood"}}
		if err := bans.Apply(ctx, []actions.Change{c}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkApplyMany: persistChanges+1 changes (a cleaner pass, a burst)
// applied to the view of 101,000 prefixes: one new table with them.
func BenchmarkApplyMany(b *testing.B) {
	bans, _ := benchBans(b)
	until := time.Now().Add(time.Hour)
	ctx := context.Background()
	changes := make([]actions.Change, persistChanges+1)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		for j := range changes {
			a := netip.AddrFrom4([4]byte{203, 0, byte(113 + i%2), byte(j)})
			changes[j] = actions.Change{Entry: actions.Entry{Prefix: netip.PrefixFrom(a, 32), Kind: actions.KindBan, Until: until, Rule: "flood"}}
		}
		if err := bans.Apply(ctx, changes); err != nil {
			b.Fatal(err)
		}
	}
}
