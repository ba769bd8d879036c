package endpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/logjail/logjail/actions"
	"github.com/logjail/logjail/detector"
	"github.com/logjail/logjail/limits"
	"github.com/logjail/logjail/rules"
)

// detWindows answers Windows from a real detector, as the daemon does.
type detWindows struct {
	d     *detector.Detector
	rules []*rules.Rule
}

func (w *detWindows) Windows(a netip.Addr, rule string, now time.Time) ([]Window, error) {
	var out []Window
	found := rule == ""
	for _, r := range w.rules {
		if rule != "" && r.Name != rule {
			continue
		}
		found = true
		if q, ok := w.d.Query(r, a.String(), now); ok {
			out = append(out, Window{Rule: r.Name, Key: a.String(), KeyQuery: q})
		}
	}
	if !found {
		return nil, fmt.Errorf("event %q: no such rule", rule)
	}
	return out, nil
}

// serve starts the endpoint on a free loopback port; it is shut down at
// the test's end.
func serve(t *testing.T, c Config, bans *Bans, w Windows) (string, *Server) {
	t.Helper()
	return serveAt(t, c, bans, w, time.Now)
}

// serveAt is serve on the clock now.
func serveAt(t *testing.T, c Config, bans *Bans, w Windows, now func() time.Time) (string, *Server) {
	t.Helper()
	c.Listen = "127.0.0.1:0"
	l, err := Listen(c)
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(c, bans, w, nil)
	s.now = now
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return "http://" + l.Addr().String(), s
}

func get(t *testing.T, url string, hdr ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

func entry(p string, kind actions.Kind, until time.Time, delay time.Duration) actions.Entry {
	return actions.Entry{Prefix: netip.MustParsePrefix(p), Kind: kind, Until: until, Delay: delay, Rule: "flood", Key: p, Reason: "rate 31 per 10s > 30 (rule flood)"}
}

// TestAuth: the answers of /auth to a proxy on loopback asking about
// clients through X-Forwarded-For.
func TestAuth(t *testing.T) {
	bans := NewBans("endpoint")
	url, _ := serve(t, Config{Trusted: loopback}, bans, nil)
	hour := time.Now().Add(time.Hour)
	err := bans.Sync(context.Background(), []actions.Entry{
		entry("198.51.100.7/32", actions.KindBan, hour, 0),
		entry("203.0.113.0/24", actions.KindBan, time.Time{}, 0),
		entry("198.51.100.8/32", actions.KindThrottle, hour, 20*time.Second),
		entry("2001:db8:1::/64", actions.KindThrottle, hour, 10*time.Second),
		entry("2001:db8:1::5/128", actions.KindBan, hour, 0),
		entry("198.51.100.9/32", actions.KindBan, time.Now().Add(-time.Second), 0), // ended
		entry("127.0.0.9/32", actions.KindBan, hour, 0),                            // an operator's --force
	}, []netip.Prefix{netip.MustParsePrefix("203.0.113.9/32"), netip.MustParsePrefix("127.0.0.0/8")})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		client   string
		code     int
		decision string
		retry    string
	}{
		{"198.51.100.7", 403, "ban", "3600"}, // the seconds until the ban ends
		{"198.51.100.1", 200, "allow", ""},
		{"203.0.113.77", 403, "ban", ""},  // until lifted: no end to tell
		{"203.0.113.9", 200, "allow", ""}, // allowed inside the banned /24
		{"198.51.100.8", 429, "throttle", "20"},
		{"2001:db8:1::abc", 429, "throttle", "10"},
		{"2001:db8:1::5", 403, "ban", "3600"}, // a ban inside a throttled /64
		{"198.51.100.9", 200, "allow", ""},
		{"127.0.0.9", 403, "ban", "3600"},
	} {
		resp, body := get(t, url+"/auth", "X-Forwarded-For", c.client)
		if resp.StatusCode != c.code || resp.Header.Get("X-Logjail-Decision") != c.decision || resp.Header.Get("Retry-After") != c.retry || body != "" {
			t.Errorf("%s: %d %q Retry-After %q body %q; want %d %q %q and no body", c.client, resp.StatusCode,
				resp.Header.Get("X-Logjail-Decision"), resp.Header.Get("Retry-After"), body, c.code, c.decision, c.retry)
		}
	}
	// A JSON body only when asked for.
	resp, body := get(t, url+"/auth", "X-Forwarded-For", "198.51.100.7", "Accept", "application/json")
	var ans authAnswer
	if err := json.Unmarshal([]byte(body), &ans); err != nil || resp.StatusCode != 403 || ans.Decision != "ban" || ans.Rule != "flood" || ans.Until == "" || !strings.Contains(ans.Reason, "rate 31") {
		t.Errorf("JSON answer: %d %q (%v)", resp.StatusCode, body, err)
	}
	// Garbage is a 400, never a 500.
	for _, bad := range []string{"unknown", "198.51.100.7, nonsense", "fe80::1%eth0", strings.Repeat("9", 100)} {
		if resp, _ := get(t, url+"/auth", "X-Forwarded-For", bad); resp.StatusCode != 400 {
			t.Errorf("X-Forwarded-For %q: %d, want 400", bad, resp.StatusCode)
		}
	}
	if resp, _ := get(t, url+"/auth", "X-Real-IP", "1.2.3"); resp.StatusCode != 400 {
		t.Errorf("a bad X-Real-IP: %d, want 400", resp.StatusCode)
	}
	// Unbanned: 200 at once.
	if err := bans.Apply(context.Background(), []actions.Change{{Entry: actions.Entry{Prefix: netip.MustParsePrefix("198.51.100.7/32")}, Delete: true}}); err != nil {
		t.Fatal(err)
	}
	if resp, _ := get(t, url+"/auth", "X-Forwarded-For", "198.51.100.7"); resp.StatusCode != 200 {
		t.Errorf("after the unban: %d", resp.StatusCode)
	}
}

// TestAuthBeforeState: before the daemon has loaded its state, fail: open
// lets everyone through and fail: closed turns everyone away.
func TestAuthBeforeState(t *testing.T) {
	for _, closed := range []bool{false, true} {
		url, _ := serve(t, Config{Trusted: loopback, FailClosed: closed}, NewBans("endpoint"), nil)
		resp, _ := get(t, url+"/auth", "X-Forwarded-For", "198.51.100.7")
		want := 200
		if closed {
			want = 503
		}
		if resp.StatusCode != want || resp.Header.Get("X-Logjail-Decision") != "unready" {
			t.Errorf("closed=%v: %d %q, want %d unready", closed, resp.StatusCode, resp.Header.Get("X-Logjail-Decision"), want)
		}
	}
}

// TestThrottleQuery: the Cerberus answer from a real detector's windows,
// the bans view holding what the detector decided, as the actions manager
// makes it.
func TestThrottleQuery(t *testing.T) {
	persec := &rules.Rule{Name: "second", Limits: []rules.Limit{{Kind: limits.Rate{}, N: 3, Window: time.Second, Text: "3 per second"}}, Ban: rules.Ban{For: time.Hour, After: 100}, Throttle: &rules.Throttle{InitialDelay: time.Second, MaxDelay: time.Second, Quiet: time.Second}}
	perten := &rules.Rule{Name: "ten", Limits: []rules.Limit{{Kind: limits.Rate{}, N: 5, Window: 10 * time.Second, Text: "5 per 10s"}}, Ban: rules.Ban{For: time.Hour, After: 100}, Throttle: &rules.Throttle{InitialDelay: time.Second, MaxDelay: time.Second, Quiet: time.Second}}
	d := detector.New(detector.Options{})
	now := time.Now().Truncate(time.Second).Add(100 * time.Millisecond)
	view := []actions.Entry{entry("203.0.113.0/24", actions.KindBan, time.Time{}, 0)}
	var ds []detector.Decision
	for range 7 {
		for _, r := range []*rules.Rule{persec, perten} {
			ds = d.Charge(now, &rules.Charge{Rule: r, Key: "198.51.100.7"}, ds[:0])
			for _, dec := range ds {
				if dec.Kind == detector.Throttle {
					view = append(view, actions.Entry{Prefix: netip.MustParsePrefix("198.51.100.7/32"), Kind: actions.KindThrottle,
						Until: dec.Until, Delay: dec.Until.Sub(now), Rule: dec.Rule, Key: dec.Key, Reason: dec.Reason})
				}
			}
		}
	}
	bans := NewBans("endpoint")
	bans.Sync(context.Background(), view, nil)
	url, _ := serveAt(t, Config{Trusted: loopback, SecondPenalty: 5 * time.Second}, bans, &detWindows{d: d, rules: []*rules.Rule{persec, perten}},
		func() time.Time { return now })
	check := func(query, want string) {
		t.Helper()
		resp, body := get(t, url+"/v1/throttle?"+query)
		if resp.StatusCode != 200 || strings.TrimSpace(body) != want {
			t.Errorf("%s: %d %s, want %s", query, resp.StatusCode, body, want)
		}
	}
	// 7 in the 10 s window leave at +10 s (sleep 10); 7 in the second
	// leave at +1 s, raised to the second penalty (5).
	check("ip=198.51.100.7", `{"throttle":{"range":"198.51.100.7","reason":"10s","sleep":10,"request_count":7}}`)
	check("ip=198.51.100.7&event=second", `{"throttle":{"range":"198.51.100.7","reason":"second","sleep":5,"request_count":7}}`)
	check("ip=198.51.100.8", `{"throttle":{"range":"198.51.100.8","reason":"","sleep":0,"request_count":0}}`)
	check("ip=203.0.113.5", `{"throttle":{"range":"203.0.113.0/24","reason":"banned","sleep":-1,"request_count":0}}`)
	for _, bad := range []string{"ip=", "ip=nonsense", "ip=198.51.100.7&event=nosuchrule"} {
		if resp, _ := get(t, url+"/v1/throttle?"+bad); resp.StatusCode != 400 {
			t.Errorf("%s: %d, want 400", bad, resp.StatusCode)
		}
	}
}

// TestListenLoopbackOnly: a configuration that listens beyond loopback is
// refused, naming the option, unless allow_remote says so.
func TestListenLoopbackOnly(t *testing.T) {
	for _, c := range []struct {
		listen string
		remote bool
		ok     bool
	}{
		{"127.0.0.1:7390", false, true},
		{"[::1]:7390", false, true},
		{"localhost:7390", false, true},
		{"unix:/run/logjail/auth.sock", false, true},
		{"0.0.0.0:7390", false, false},
		{":7390", false, false},
		{"198.51.100.1:7390", false, false},
		{"198.51.100.1:7390", true, true},
		{"127.0.0.1", false, false},
		{"unix:auth.sock", false, false},
	} {
		text := fmt.Sprintf("state_dir: /tmp/x\nsources: [{name: web, paths: [/var/log/a.log]}]\nactions:\n  - type: endpoint\n    listen: %q\n    allow_remote: %v\n", c.listen, c.remote)
		cfg, err := rules.Parse("logjail.yaml", []byte(text), rules.Options{HostAddrs: []netip.Addr{}})
		if err != nil {
			t.Fatal(err)
		}
		err = actions.Builtin(CheckOptions).Check(cfg)
		if c.ok != (err == nil) || (err != nil && !strings.Contains(err.Error(), "logjail.yaml:5: actions[0].listen")) {
			t.Errorf("listen %s allow_remote %v: %v", c.listen, c.remote, err)
		}
	}
}

// TestExampleEndpoint: the endpoint the example configuration shows in
// comments is valid as written, with the defaults it states.
func TestExampleEndpoint(t *testing.T) {
	var b strings.Builder
	in := false
	for _, l := range strings.Split(string(rules.Example()), "\n") {
		if strings.HasPrefix(l, "  # - type: endpoint") {
			in = true
		} else if in && !strings.HasPrefix(l, "  #   ") {
			in = false
		}
		if in {
			l = "  " + l[4:]
		}
		b.WriteString(l + "\n")
	}
	cfg, err := rules.Parse("example.yaml", []byte(b.String()), rules.Options{HostAddrs: []netip.Addr{}})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := Configs(cfg)
	if err != nil || len(cs) != 1 {
		t.Fatalf("Configs = %+v, %v; want the example's endpoint", cs, err)
	}
	c := cs[0]
	if c.Listen != DefaultListen || c.FailClosed || c.AllowRemote || len(c.Trusted) != 2 || c.SecondPenalty != 0 ||
		c.MaxConns != DefaultMaxConns || c.ReadTimeout != DefaultReadTimeout || c.IdleTimeout != DefaultIdleTimeout {
		t.Errorf("the example's endpoint %+v is not the defaults", c)
	}
}

// TestUnixSocket: the endpoint on a unix socket answers a local proxy,
// which must name the client; the socket is 0666 (nothing can be changed
// through it) and a stale one is replaced.
func TestUnixSocket(t *testing.T) {
	path := t.TempDir() + "/auth.sock"
	c := Config{Listen: "unix:" + path, Trusted: loopback}
	for range 2 { // the second Listen replaces the first's socket
		l, err := Listen(c)
		if err != nil {
			t.Fatal(err)
		}
		l.(*net.UnixListener).SetUnlinkOnClose(false)
		l.Close()
	}
	l, err := Listen(c)
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o666 {
		t.Errorf("socket mode %v %v, want 0666", fi.Mode(), err)
	}
	// A socket still served is another daemon's: a second Listen refuses
	// it and leaves it in place, rather than cutting the first one off.
	if l2, err := Listen(c); err == nil {
		l2.Close()
		t.Fatal("Listen over a socket in use succeeded")
	} else if !strings.Contains(err.Error(), "in use") {
		t.Errorf("Listen over a socket in use: %v, want it to say so", err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the socket in use was removed: %v", err)
	}
	bans := NewBans("endpoint")
	bans.Sync(context.Background(), []actions.Entry{entry("198.51.100.7/32", actions.KindBan, time.Now().Add(time.Hour), 0)}, nil)
	s := NewServer(c, bans, nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, l) }()
	defer func() { cancel(); <-done }()
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	}}}
	for _, tc := range []struct {
		xff  string
		want int
	}{{"198.51.100.7", 403}, {"198.51.100.8", 200}, {"", 400}} {
		req, _ := http.NewRequest("GET", "http://logjail/auth", nil)
		if tc.xff != "" {
			req.Header.Set("X-Forwarded-For", tc.xff)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("X-Forwarded-For %q over the socket: %d, want %d", tc.xff, resp.StatusCode, tc.want)
		}
	}
}

// TestLimitOptions: max_conns, read_timeout and idle_timeout are read and
// validated like every option, the errors naming the file, the line of
// the option's value and the option.
func TestLimitOptions(t *testing.T) {
	for _, c := range []struct {
		opts string
		want string // "" valid
	}{
		{"max_conns: 100\n    read_timeout: 2s\n    idle_timeout: 30s", ""},
		{"max_conns: 0", "logjail.yaml:5: actions[0].max_conns"},
		{"max_conns: many", "logjail.yaml:5: actions[0].max_conns"},
		{"read_timeout: 0s", "logjail.yaml:5: actions[0].read_timeout"},
		{"idle_timeout: forever", "logjail.yaml:5: actions[0].idle_timeout"},
	} {
		text := "state_dir: /tmp/x\nsources: [{name: web, paths: [/var/log/a.log]}]\nactions:\n  - type: endpoint\n    " + c.opts + "\n"
		cfg, err := rules.Parse("logjail.yaml", []byte(text), rules.Options{HostAddrs: []netip.Addr{}})
		if err != nil {
			t.Fatal(err)
		}
		cs, err := Configs(cfg)
		if c.want == "" {
			if err != nil || len(cs) != 1 || cs[0].MaxConns != 100 || cs[0].ReadTimeout != 2*time.Second || cs[0].IdleTimeout != 30*time.Second {
				t.Errorf("%s: %+v %v", c.opts, cs, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error at %s", c.opts, err, c.want)
		}
	}
}

// TestStopped: a listener that stops listening under the server (shut
// down from outside) ends Serve with ErrStopped, and Err and Stats say so;
// until then Err is nil.
func TestStopped(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	bans := NewBans("endpoint")
	bans.Sync(context.Background(), nil, nil)
	s := NewServer(Config{Name: "endpoint", Trusted: loopback}, bans, nil, nil)
	done := make(chan error, 1)
	go func() { done <- s.Serve(context.Background(), l) }()
	if resp, _ := get(t, "http://"+l.Addr().String()+"/auth"); resp.StatusCode != 200 {
		t.Fatalf("serving: %d", resp.StatusCode)
	}
	if err := s.Err(); err != nil || !s.Stats().Serving {
		t.Fatalf("serving: Err %v, Stats %+v", err, s.Stats())
	}
	raw, err := l.(*net.TCPListener).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	raw.Control(func(fd uintptr) { syscall.Shutdown(int(fd), syscall.SHUT_RDWR) })
	select {
	case err := <-done:
		if !errors.Is(err, ErrStopped) {
			t.Errorf("Serve: %v, want ErrStopped", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve goes on after its listener was shut down")
	}
	if err := s.Err(); !errors.Is(err, ErrStopped) {
		t.Errorf("Err: %v, want ErrStopped", err)
	}
	if st := s.Stats(); st.Serving || st.Stopped == "" {
		t.Errorf("Stats: %+v, want not serving and why", st)
	}
}
