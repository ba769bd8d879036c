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
	"sync"
	"sync/atomic"
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
	// MaxConns is the most connections held at once: beyond it, the one
	// longest without a request is closed (default DefaultMaxConns).
	MaxConns int
	// ReadTimeout bounds reading a request on a new connection, from the
	// connect (default DefaultReadTimeout); IdleTimeout how long a
	// keep-alive connection waits for its next request (default
	// DefaultIdleTimeout).
	ReadTimeout, IdleTimeout time.Duration
}

// The defaults of max_conns, read_timeout and idle_timeout.
const (
	DefaultMaxConns    = 4096
	DefaultReadTimeout = 5 * time.Second
	DefaultIdleTimeout = 60 * time.Second
)

// DefaultListen is where an endpoint listens without `listen:`.
const DefaultListen = "127.0.0.1:7390"

// CheckOptions reads the options of an endpoint action, recording every
// problem in o (o.Err reports them): the endpoint's row of the actions
// registry, actions.Builtin(endpoint.CheckOptions), which every load of the
// configuration is given (rules.Options.Actions), so that `logjail check`,
// the daemon's start and a reload check the endpoint as the daemon will
// open it, in the same pass as the rest of the file.
func CheckOptions(o *actions.Options) { parseOptions(o) }

// Configs reads the endpoint actions of cfg; the errors name the file, the
// line of the option's value and the option. A configuration loaded with
// the registry has none left: its load reported them.
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
		MaxConns:      o.Int("max_conns", DefaultMaxConns, 16, 1<<20),
		ReadTimeout:   o.Duration("read_timeout", DefaultReadTimeout, 100*time.Millisecond, 10*time.Minute),
		IdleTimeout:   o.Duration("idle_timeout", DefaultIdleTimeout, 100*time.Millisecond, time.Hour),
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
	// LogOnly: the rule decides and records but acts on nothing, so /auth
	// never refuses for it.
	LogOnly bool
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
	windows atomic.Pointer[Windows] // nil until the detector is there
	now     func() time.Time
	log     *slog.Logger

	mu      sync.Mutex
	ln      *limitListener // while serving
	stopped error          // why serving ended, when not for its context
}

// NewServer makes the endpoint of c over bans (driven by the actions
// manager) and windows (nil: /v1/throttle answers from the bans alone,
// until SetWindows). Zero limits in c take their defaults.
func NewServer(c Config, bans *Bans, windows Windows, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if c.MaxConns <= 0 {
		c.MaxConns = DefaultMaxConns
	}
	if c.ReadTimeout <= 0 {
		c.ReadTimeout = DefaultReadTimeout
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	s := &Server{cfg: c, bans: bans, now: time.Now, log: log}
	s.SetWindows(windows)
	return s
}

// SetWindows sets the detector view /v1/throttle reads. It is safe while
// the server serves: the daemon serves from its first moment and hands the
// detector over once its state is restored.
func (s *Server) SetWindows(w Windows) {
	if w == nil {
		s.windows.Store(nil)
		return
	}
	s.windows.Store(&w)
}

// Listen opens the endpoint's listener: TCP, or a unix socket (mode 0666:
// the endpoint only answers, nothing can be changed through it) replacing
// a stale one.
func Listen(c Config) (net.Listener, error) {
	if err := checkListen(c.Listen, c.AllowRemote); err != nil {
		return nil, err
	}
	if path, ok := strings.CutPrefix(c.Listen, "unix:"); ok {
		if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
			// A socket someone still answers on is another daemon's:
			// removing it would cut that daemon's proxy off (the endpoint
			// listens before the database is locked). Only a stale one,
			// left by a crash, is replaced.
			if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
				c.Close()
				return nil, fmt.Errorf("%s: in use by another process (is logjail already running?)", path)
			}
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

// ErrStopped is the error of Serve, and of Err, when the listener stopped
// while the server was meant to serve.
var ErrStopped = errors.New("the endpoint stopped serving")

// Serve serves on l until ctx is done; then it returns nil. It holds at
// most MaxConns connections, closing the one longest without a request to
// make room (idle and slow clients cannot starve the proxy), and an error
// of Accept (EMFILE, ENFILE, ECONNABORTED...) never ends it: it backs off
// and tries again. Should serving end otherwise (the listener closed
// under it), Serve returns an error wrapping ErrStopped, and Err reports
// it.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	ln := newLimitListener(l, s.cfg.MaxConns, s.log, s.now)
	s.mu.Lock()
	s.ln, s.stopped = ln, nil
	s.mu.Unlock()
	fs := &fasthttp.Server{
		Handler:     s.handle,
		Name:        "logjail",
		ReadTimeout: s.cfg.ReadTimeout,
		IdleTimeout: s.cfg.IdleTimeout,
		// The listener holds the connections to MaxConns, evicting as it
		// must; fasthttp's own limit, which answers 503, is left above
		// it, for connections being closed while new ones arrive.
		Concurrency: 2*s.cfg.MaxConns + 64,
		// A connection whose request has begun, or has just been
		// answered, goes to the back of the eviction order.
		ConnState: func(c net.Conn, st fasthttp.ConnState) {
			if tc, ok := c.(*trackedConn); ok && (st == fasthttp.StateActive || st == fasthttp.StateIdle) {
				tc.l.touch(tc)
			}
		},
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
	err := fs.Serve(ln)
	if ctx.Err() != nil {
		return nil
	}
	if err == nil {
		err = net.ErrClosed
	}
	err = fmt.Errorf("%w: %s: %w", ErrStopped, l.Addr(), err)
	s.mu.Lock()
	s.stopped = err
	s.mu.Unlock()
	s.log.Error("endpoint stopped serving", "err", err)
	return err
}

// Stats are an endpoint's connections and accept errors.
type Stats struct {
	Serving      bool  // Serve is running
	Ready        bool  // the bans are loaded: answers are no longer by `fail`
	Conns        int   // held now
	Accepted     int64 // since Serve started
	Evicted      int64 // closed to make room (max_conns, or out of descriptors)
	AcceptErrors int64 // failed Accept calls, each retried
	// AcceptFailing is the last Accept error while Accept has failed
	// without a success since FailingSince; "" when its last call
	// succeeded.
	AcceptFailing string
	FailingSince  time.Time
	Stopped       string // why serving ended, when it ended unbidden
}

// Stats reports the connections and accept errors now.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	ln, stopped := s.ln, s.stopped
	s.mu.Unlock()
	st := Stats{Ready: s.bans.Ready()}
	if stopped != nil {
		st.Stopped = stopped.Error()
	}
	if ln == nil {
		return st
	}
	st.Serving = stopped == nil
	st.Conns = ln.len()
	st.Accepted, st.Evicted, st.AcceptErrors = ln.accepted.Load(), ln.evicted.Load(), ln.acceptErrors.Load()
	if err, since := ln.failing(); err != nil {
		st.AcceptFailing, st.FailingSince = err.Error(), since
	}
	return st
}

// Err reports whether the endpoint serves: an error wrapping ErrStopped
// once serving ended unbidden, or one naming the accept error when Accept
// has failed for 10 s without a success; else nil.
func (s *Server) Err() error {
	s.mu.Lock()
	ln, stopped := s.ln, s.stopped
	s.mu.Unlock()
	if stopped != nil {
		return stopped
	}
	if ln == nil {
		return nil
	}
	if err, since := ln.failing(); err != nil && s.now().Sub(since) >= acceptFailing {
		return fmt.Errorf("endpoint %s: accept has failed for %v: %w", s.cfg.Name, s.now().Sub(since).Round(time.Second), err)
	}
	return nil
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
	return clientAddr(peer, peerOK, ctx.Request.Header.PeekAll, s.cfg.Trusted)
}

// auth answers GET /auth: 200 allowed, 403 banned (with Retry-After, the
// seconds until the ban ends, unless it lasts until lifted), 429 throttled
// with Retry-After, 400 when the client cannot be told.
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
		if ra := e.RetryAfter(now); ra > 0 { // a ban until lifted says none
			var buf [20]byte
			h.SetBytesV("Retry-After", strconv.AppendInt(buf[:0], int64(ra), 10))
		}
		if !js { // the body's strings only for a caller that reads them (no allocation)
			ctx.SetStatusCode(fasthttp.StatusForbidden)
			return
		}
		answer(ctx, fasthttp.StatusForbidden, true, entryAnswer(decisionBan, a, &e, now))
	default:
		var buf [20]byte
		h.Set(headerDecision, decisionThrottle)
		h.SetBytesV("Retry-After", strconv.AppendInt(buf[:0], int64(max(1, e.RetryAfter(now))), 10))
		if !js {
			ctx.SetStatusCode(fasthttp.StatusTooManyRequests)
			return
		}
		answer(ctx, fasthttp.StatusTooManyRequests, true, entryAnswer(decisionThrottle, a, &e, now))
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
// rule), consistent with /auth (the package documentation): sleep -1 and
// reason "banned" where /auth answers 403; where it answers 429, the
// larger of its Retry-After and the seconds until an over limit's window
// falls back within it, with that limit's period as the reason ("second",
// "minute", "10s") or "throttled"; where it answers 200, the seconds a
// limit that is over predicts (raised to second_penalty for a limit of a
// second or less), else 0 — and reason "log_only" when the only state is
// one /auth does not enforce (a log_only rule's, or a decision made while
// the circuit breaker was open). range is the range:NAME of the client's
// range where it is in a range with limits or the ban is of a range key,
// else the key or prefix the answer concerns, else the address.
func (s *Server) Throttle(a netip.Addr, event string) (ThrottleAnswer, error) {
	var ans ThrottleAnswer
	t := &ans.Throttle
	t.Range = a.String()
	now := s.now()
	var ws []Window
	if w := s.windows.Load(); w != nil {
		var err error
		if ws, err = (*w).Windows(a, event, now); err != nil {
			return ans, err
		}
	}
	for _, w := range ws {
		if r := rangeKey(w.Rule, w.Key); r != "" {
			t.Range = r
		}
		for _, l := range w.Limits {
			if l.Kind.Traits().Unit == "requests" { // a count of requests in the window: a rate
				t.RequestCount = max(t.RequestCount, l.Count)
			}
		}
	}
	// refused: /auth refuses a, for some rule; held: for the one asked
	// about (the view keeps one entry per prefix, naming one of the rules
	// that block it).
	e, refused := s.bans.Lookup(a, now)
	held := refused && (event == "" || e.Rule == event)
	if held && e.Kind == actions.KindBan {
		t.Range, t.Reason, t.Sleep = rangeOr(e.Rule, e.Key, actions.PrefixString(e.Prefix)), "banned", -1
		return ans, nil
	}
	var sleep time.Duration
	logOnly := ""
	for _, w := range ws {
		// A ladder state while /auth lets a through is one it does not
		// enforce.
		if w.LogOnly || (w.Kind != "" && !refused) {
			if w.Kind != "" || anyOver(w.Limits) {
				logOnly = rangeOr(w.Rule, w.Key, w.Key)
			}
			continue
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
				sleep, t.Range, t.Reason = d, rangeOr(w.Rule, w.Key, w.Key), period(l.Window)
				if l.Kind.Traits().Unit == "requests" {
					t.RequestCount = l.Count
				}
			}
		}
	}
	if held { // a throttle: /auth answers 429 with this Retry-After
		if ra := time.Duration(max(1, e.RetryAfter(now))) * time.Second; ra > sleep {
			sleep, t.Range, t.Reason = ra, rangeOr(e.Rule, e.Key, actions.PrefixString(e.Prefix)), "throttled"
		}
	}
	switch {
	case sleep > 0:
		t.Sleep = int(math.Ceil(sleep.Seconds()))
	case logOnly != "":
		t.Range, t.Reason = logOnly, "log_only"
	}
	return ans, nil
}

// rangeKey is the range:NAME of a key or rule: a group range's key, or a
// range with limits' rule; "" for any other.
func rangeKey(rule, key string) string {
	if strings.HasPrefix(key, "range:") {
		return key
	}
	if strings.HasPrefix(rule, "range:") {
		return rule
	}
	return ""
}

// rangeOr is rangeKey, or else other.
func rangeOr(rule, key, other string) string {
	if r := rangeKey(rule, key); r != "" {
		return r
	}
	return other
}

func anyOver(ls []detector.LimitState) bool {
	for _, l := range ls {
		if l.Over {
			return true
		}
	}
	return false
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
