package endpoint

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/logjail/logjail/actions"
	"github.com/logjail/logjail/detector"
	"github.com/logjail/logjail/rules"
	"github.com/valyala/fasthttp"
)

// Config is one `type: endpoint` action.
type Config struct {
	Name string
	// Listen is host:port (loopback unless AllowRemote) or unix:PATH.
	Listen      string
	AllowRemote bool
	Trusted     Proxies // peers whose X-Forwarded-For and X-Real-IP are believed
	FailClosed  bool    // before the state is loaded: 503 (closed) or 200 (open)
	// SecondPenalty raises the sleep of a client over a limit of a second
	// or less to at least this (Cerberus's second_penalty).
	SecondPenalty time.Duration
}

// DefaultListen is where an endpoint listens without `listen:`.
const DefaultListen = "127.0.0.1:7390"

func init() {
	actions.RegisterValidator("endpoint", func(o *actions.Options) { parseOptions(o) })
}

// Configs reads the endpoint actions of cfg; the errors name the file,
// line and option.
func Configs(cfg *rules.Config) ([]Config, error) {
	var out []Config
	var errs []error
	for i, a := range cfg.Actions {
		if a.Type != "endpoint" {
			continue
		}
		o := actions.OptionsOf(cfg, i)
		c := parseOptions(o)
		if err := o.Err(); err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, c)
	}
	return out, errors.Join(errs...)
}

func parseOptions(o *actions.Options) Config {
	c := Config{
		Name:          o.String("name", "endpoint"),
		Listen:        o.String("listen", DefaultListen),
		AllowRemote:   o.Bool("allow_remote", false),
		FailClosed:    o.OneOf("fail", "open", "open", "closed") == "closed",
		SecondPenalty: o.Duration("second_penalty", 0, 0, 24*time.Hour),
	}
	if o.Has("trusted_proxies") {
		c.Trusted = o.Prefixes("trusted_proxies")
	} else {
		c.Trusted = Proxies{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	}
	if o.Has("on") {
		o.Errorf("on", "the endpoint answers for throttles and bans alike: `on` is not an option of it")
	}
	if err := checkListen(c.Listen, c.AllowRemote); err != nil {
		o.Errorf("listen", "%v", err)
	}
	return c
}

// checkListen refuses an address that is not loopback unless allowed.
func checkListen(listen string, allowRemote bool) error {
	if path, ok := strings.CutPrefix(listen, "unix:"); ok {
		if path == "" || !strings.HasPrefix(path, "/") {
			return fmt.Errorf("%q: want unix:/absolute/path", listen)
		}
		return nil
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return fmt.Errorf("%q: want host:port or unix:PATH", listen)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("%q: the port must be 0-65535 (0: any free one)", listen)
	}
	if allowRemote {
		return nil
	}
	if host == "localhost" {
		return nil
	}
	a, err := netip.ParseAddr(host)
	if err != nil || !a.IsLoopback() {
		return fmt.Errorf("%q is not a loopback address: the endpoint tells anyone who asks who is banned; set allow_remote: true to listen there", listen)
	}
	return nil
}

// Window is the detector's state of the key an address is charged to under
// one rule.
type Window struct {
	Rule, Key string
	detector.KeyQuery
}

// Windows is the read-only view of the detector's windows the daemon hands
// the endpoint, for the Cerberus query.
type Windows interface {
	// Windows returns, for the named rule or every rule (rule ""), the key
	// a is charged to and its state at now; keys a rule does not track are
	// left out. An unknown rule is an error.
	Windows(a netip.Addr, rule string, now time.Time) ([]Window, error)
}

// Server answers a reverse proxy's questions. It is built on
// github.com/valyala/fasthttp rather than net/http: /auth is asked before
// every request a proxy serves, and on one core net/http answered about
// 31,000 a second where fasthttp answers about 62,000 (README,
// Benchmarks).
type Server struct {
	cfg     Config
	bans    *Bans
	windows Windows
	now     func() time.Time
	log     *slog.Logger
}

// NewServer makes the endpoint of c over bans (driven by the actions
// manager) and windows (nil: /v1/throttle answers from the bans alone).
func NewServer(c Config, bans *Bans, windows Windows, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{cfg: c, bans: bans, windows: windows, now: time.Now, log: log}
}

// SetWindows sets the detector view /v1/throttle reads; call it before
// Serve.
func (s *Server) SetWindows(w Windows) { s.windows = w }

// Listen opens the endpoint's listener: TCP, or a unix socket (mode 0666:
// the endpoint only answers, nothing can be changed through it) replacing
// a stale one.
func Listen(c Config) (net.Listener, error) {
	if err := checkListen(c.Listen, c.AllowRemote); err != nil {
		return nil, err
	}
	if path, ok := strings.CutPrefix(c.Listen, "unix:"); ok {
		if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
			os.Remove(path)
		}
		l, err := net.Listen("unix", path)
		if err != nil {
			return nil, err
		}
		if err := os.Chmod(path, 0o666); err != nil {
			l.Close()
			return nil, err
		}
		return l, nil
	}
	return net.Listen("tcp", c.Listen)
}

// Serve serves on l until ctx is done.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	fs := &fasthttp.Server{
		Handler:               s.handle,
		Name:                  "logjail",
		ReadTimeout:           2 * time.Minute, // also how long an idle keep-alive connection is kept
		WriteTimeout:          10 * time.Second,
		MaxRequestBodySize:    4096, // questions have no body
		NoDefaultContentType:  true,
		NoDefaultServerHeader: true,
		Logger:                fastLogger{s.log},
	}
	stop := context.AfterFunc(ctx, func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		fs.ShutdownWithContext(sctx)
	})
	defer stop()
	err := fs.Serve(l)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// fastLogger passes fasthttp's rare messages (a malformed request) to the
// log at debug level.
type fastLogger struct{ log *slog.Logger }

func (l fastLogger) Printf(format string, args ...any) {
	l.log.Debug("endpoint", "msg", fmt.Sprintf(format, args...))
}

// handle routes a request.
func (s *Server) handle(ctx *fasthttp.RequestCtx) {
	if !ctx.IsGet() && !ctx.IsHead() {
		ctx.Response.Header.Set("Allow", "GET, HEAD")
		ctx.Error("method not allowed", fasthttp.StatusMethodNotAllowed)
		return
	}
	switch string(ctx.Path()) {
	case "/auth":
		s.auth(ctx)
	case "/v1/throttle":
		s.throttle(ctx)
	default:
		ctx.Error("not found: the endpoint answers GET /auth and GET /v1/throttle", fasthttp.StatusNotFound)
	}
}

// The decisions, in the X-Logjail-Decision header and the JSON body.
const (
	decisionAllow    = "allow"
	decisionThrottle = "throttle"
	decisionBan      = "ban"
	decisionUnready  = "unready"
)

const headerDecision = "X-Logjail-Decision"

// authAnswer is /auth's JSON body.
type authAnswer struct {
	Decision   string `json:"decision"`
	Client     string `json:"client,omitempty"`
	Rule       string `json:"rule,omitempty"`
	Key        string `json:"key,omitempty"`
	Prefix     string `json:"prefix,omitempty"`
	Until      string `json:"until,omitempty"`
	RetryAfter int    `json:"retry_after,omitempty"`
	Reason     string `json:"reason,omitempty"`
	Error      string `json:"error,omitempty"`
}

// client is the client a request asks about.
func (s *Server) client(ctx *fasthttp.RequestCtx) (netip.Addr, error) {
	var peer netip.Addr
	peerOK := false
	if ta, ok := ctx.RemoteAddr().(*net.TCPAddr); ok {
		peer, peerOK = netip.AddrFromSlice(ta.IP)
		peer = peer.Unmap()
	}
	h := &ctx.Request.Header
	return clientAddr(peer, peerOK, h.PeekAll("X-Forwarded-For"), h.PeekAll("X-Real-Ip"), s.cfg.Trusted)
}

// auth answers GET /auth: 200 allowed, 403 banned, 429 throttled with
// Retry-After, 400 when the client cannot be told.
func (s *Server) auth(ctx *fasthttp.RequestCtx) {
	h := &ctx.Response.Header
	js := wantsJSON(ctx)
	if !s.bans.Ready() {
		h.Set(headerDecision, decisionUnready)
		code := fasthttp.StatusOK
		if s.cfg.FailClosed {
			code = fasthttp.StatusServiceUnavailable
			h.Set("Retry-After", "1")
		}
		answer(ctx, code, js, authAnswer{Decision: decisionUnready})
		return
	}
	a, err := s.client(ctx)
	if err != nil {
		answer(ctx, fasthttp.StatusBadRequest, js, authAnswer{Error: err.Error()})
		return
	}
	now := s.now()
	e, ok := s.bans.Lookup(a, now)
	switch {
	case !ok:
		h.Set(headerDecision, decisionAllow)
		if js {
			answer(ctx, fasthttp.StatusOK, true, authAnswer{Decision: decisionAllow, Client: a.String()})
		}
	case e.Kind == actions.KindBan:
		h.Set(headerDecision, decisionBan)
		answer(ctx, fasthttp.StatusForbidden, js, entryAnswer(decisionBan, a, &e, now))
	default:
		var buf [20]byte
		h.Set(headerDecision, decisionThrottle)
		h.SetBytesV("Retry-After", strconv.AppendInt(buf[:0], int64(max(1, e.RetryAfter(now))), 10))
		answer(ctx, fasthttp.StatusTooManyRequests, js, entryAnswer(decisionThrottle, a, &e, now))
	}
}

func entryAnswer(decision string, a netip.Addr, e *actions.Entry, now time.Time) authAnswer {
	ans := authAnswer{Decision: decision, Client: a.String(), Rule: e.Rule, Key: e.Key,
		Prefix: actions.PrefixString(e.Prefix), RetryAfter: e.RetryAfter(now), Reason: e.Reason}
	if !e.Until.IsZero() {
		ans.Until = e.Until.UTC().Format(time.RFC3339)
	}
	return ans
}

// wantsJSON: a body only for a caller that asks for JSON.
func wantsJSON(ctx *fasthttp.RequestCtx) bool {
	return bytes.Contains(ctx.Request.Header.Peek("Accept"), []byte("application/json"))
}

// answer sets code, with a JSON body when js (or, for an error, a line of
// text).
func answer(ctx *fasthttp.RequestCtx, code int, js bool, body any) {
	ctx.SetStatusCode(code)
	if !js {
		if ans, ok := body.(authAnswer); ok && ans.Error != "" {
			ctx.SetContentType("text/plain; charset=utf-8")
			ctx.SetBodyString(ans.Error + "\n")
		}
		return
	}
	ctx.SetContentType("application/json")
	json.NewEncoder(ctx).Encode(body)
}

// ThrottleAnswer is the Cerberus answer of /v1/throttle.
type ThrottleAnswer struct {
	Throttle struct {
		Range        string `json:"range"`
		Reason       string `json:"reason"`
		Sleep        int    `json:"sleep"`
		RequestCount int64  `json:"request_count"`
	} `json:"throttle"`
}

// throttle answers GET /v1/throttle?ip=ADDRESS&event=RULE.
func (s *Server) throttle(ctx *fasthttp.RequestCtx) {
	args := ctx.QueryArgs()
	a, err := parseHost(strings.TrimSpace(string(args.Peek("ip"))))
	if err != nil {
		answer(ctx, fasthttp.StatusBadRequest, true, authAnswer{Error: "ip: " + err.Error()})
		return
	}
	if !s.bans.Ready() && s.cfg.FailClosed {
		ctx.Response.Header.Set("Retry-After", "1")
		answer(ctx, fasthttp.StatusServiceUnavailable, true, authAnswer{Decision: decisionUnready})
		return
	}
	ans, err := s.Throttle(a, string(args.Peek("event")))
	if err != nil {
		answer(ctx, fasthttp.StatusBadRequest, true, authAnswer{Error: err.Error()})
		return
	}
	answer(ctx, fasthttp.StatusOK, true, ans)
}

// Throttle computes the Cerberus answer for a under rule event ("" every
// rule): sleep -1 and reason "banned" when banned; else, when a limit is
// over, the seconds until its window falls back within it (raised to
// second_penalty for a limit of a second or less) and the limit's period
// as the reason ("second", "minute", "10s"); 0 when allowed.
func (s *Server) Throttle(a netip.Addr, event string) (ThrottleAnswer, error) {
	var ans ThrottleAnswer
	t := &ans.Throttle
	t.Range = a.String()
	now := s.now()
	var ws []Window
	if s.windows != nil {
		var err error
		if ws, err = s.windows.Windows(a, event, now); err != nil {
			return ans, err
		}
	}
	for _, w := range ws {
		for _, l := range w.Limits {
			if l.Kind == rules.LimitRate {
				t.RequestCount = max(t.RequestCount, l.Count)
			}
		}
	}
	if e, ok := s.bans.Lookup(a, now); ok && e.Kind == actions.KindBan && (event == "" || e.Rule == event) {
		t.Range, t.Reason, t.Sleep = actions.PrefixString(e.Prefix), "banned", -1
		return ans, nil
	}
	var sleep time.Duration
	for _, w := range ws {
		if w.Kind == detector.Ban {
			t.Range, t.Reason, t.Sleep = w.Key, "banned", -1
			return ans, nil
		}
		for _, l := range w.Limits {
			if !l.Over {
				continue
			}
			d := l.Sleep
			if s.cfg.SecondPenalty > 0 && l.Window <= time.Second {
				d = max(d, s.cfg.SecondPenalty)
			}
			if d >= sleep {
				sleep, t.Range, t.Reason = d, w.Key, period(l.Window)
				if l.Kind == rules.LimitRate {
					t.RequestCount = l.Count
				}
			}
		}
		if w.Kind == detector.Throttle && t.Reason == "" {
			t.Range, t.Reason = w.Key, "throttled"
			sleep = max(sleep, w.Until.Sub(now))
		}
	}
	if sleep > 0 {
		t.Sleep = int(math.Ceil(sleep.Seconds()))
	}
	return ans, nil
}

// period names a window as Cerberus does: second, minute, hour, day, or
// the duration.
func period(d time.Duration) string {
	switch d {
	case time.Second:
		return "second"
	case time.Minute:
		return "minute"
	case time.Hour:
		return "hour"
	case 24 * time.Hour:
		return "day"
	}
	return d.String()
}
