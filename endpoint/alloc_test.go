package endpoint

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/logjail/logjail/actions"
	"github.com/valyala/fasthttp"
)

// TestAuthAllocatesNothing: /auth answers a proxy (no JSON asked) without
// allocating, whatever it decides, so that a busy endpoint makes no
// garbage for the collector to run for (issue 23: on one core a
// collection's mark work is most of the answers' tail). The answers are
// the ones a proxy gets: code, decision and Retry-After.
func TestAuthAllocatesNothing(t *testing.T) {
	bans := NewBans("endpoint")
	until := time.Now().Add(time.Hour)
	es := []actions.Entry{
		{Prefix: netip.MustParsePrefix("2001:db8:7::1/128"), Kind: actions.KindBan, Until: until, Rule: "flood", Key: "2001:db8:7::1"},
		{Prefix: netip.MustParsePrefix("203.0.113.0/24"), Kind: actions.KindThrottle, Until: until, Delay: 10 * time.Second, Rule: "heavy", Key: "203.0.113.0/24"},
	}
	if err := bans.Sync(context.Background(), es, nil); err != nil {
		t.Fatal(err)
	}
	s := NewServer(Config{Trusted: Proxies{netip.MustParsePrefix("127.0.0.0/8")}}, bans, nil, nil)
	for _, c := range []struct {
		name, xff, decision string
		code                int
		retryAfter          bool
	}{
		{"allowed", "198.51.100.9", decisionAllow, 200, false},
		{"banned", "2001:db8:7::1", decisionBan, 403, true},
		{"throttled, behind two proxies", "203.0.113.5, 127.0.0.2", decisionThrottle, 429, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var req fasthttp.Request
			req.SetRequestURI("/auth")
			req.Header.Set("X-Forwarded-For", c.xff)
			ctx := &fasthttp.RequestCtx{}
			ctx.Init(&req, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 4711}, nil)
			s.handle(ctx)
			h := &ctx.Response.Header
			if got := ctx.Response.StatusCode(); got != c.code {
				t.Errorf("code %d, want %d", got, c.code)
			}
			if got := string(h.Peek(headerDecision)); got != c.decision {
				t.Errorf("%s: %q, want %q", headerDecision, got, c.decision)
			}
			if got := len(h.Peek("Retry-After")) > 0; got != c.retryAfter {
				t.Errorf("Retry-After sent: %v, want %v", got, c.retryAfter)
			}
			if n := testing.AllocsPerRun(200, func() {
				ctx.Response.Reset()
				s.handle(ctx)
			}); n != 0 {
				t.Errorf("/auth allocates %v times a request, want 0", n)
			}
		})
	}
}
