package control

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"syscall"
)

// ErrNoDaemon is wrapped by a Client's errors when no daemon answers: the
// socket does not exist, or nothing listens on it. The commands then work
// on the database.
var ErrNoDaemon = errors.New("no daemon answers on the control socket")

// ErrSocketDenied is wrapped by a Client's errors when the caller may not
// connect to the socket (neither root nor in its group).
var ErrSocketDenied = errors.New("permission denied on the control socket")

// Client talks to a daemon's control socket.
type Client struct {
	path string
	hc   *http.Client
}

// NewClient returns a client of the socket at path. Nothing is dialled
// before the first call.
func NewClient(path string) *Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
		DisableCompression: true,
	}
	return &Client{path: path, hc: &http.Client{Transport: tr}}
}

// Close closes idle connections.
func (c *Client) Close() { c.hc.CloseIdleConnections() }

func (c *Client) do(ctx context.Context, method, path string, q url.Values, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	u := "http://logjail" + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		switch {
		case errors.Is(err, syscall.ENOENT), errors.Is(err, syscall.ECONNREFUSED):
			return fmt.Errorf("%s: %w", c.path, ErrNoDaemon)
		case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
			return fmt.Errorf("%s: %w: root and the members of group logjail may connect", c.path, ErrSocketDenied)
		}
		return fmt.Errorf("control socket %s: %w", c.path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var e errorBody
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if json.Unmarshal(b, &e) != nil || e.Error == "" {
			e.Error = string(bytes.TrimSpace(b))
		}
		return errorOf(resp.StatusCode, e.Error)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("control socket %s: reading the answer: %w", c.path, err)
	}
	return nil
}

// Status asks for the daemon's status.
func (c *Client) Status(ctx context.Context) (*Status, error) {
	var st Status
	return &st, c.do(ctx, http.MethodGet, "/v1/status", nil, nil, &st)
}

// Ban asks the daemon to ban.
func (c *Client) Ban(ctx context.Context, req BanRequest) (*BanResult, error) {
	var r BanResult
	return &r, c.do(ctx, http.MethodPost, "/v1/ban", nil, req, &r)
}

// BanBatch asks the daemon to make several bans as one, all or none; it
// answers once every action applied them.
func (c *Client) BanBatch(ctx context.Context, req BatchBanRequest) (*BatchBanResult, error) {
	var r BatchBanResult
	return &r, c.do(ctx, http.MethodPost, "/v1/bans/batch", nil, req, &r)
}

// Unban asks the daemon to unban; it answers once every action applied it.
func (c *Client) Unban(ctx context.Context, req UnbanRequest) (*UnbanResult, error) {
	var r UnbanResult
	return &r, c.do(ctx, http.MethodPost, "/v1/unban", nil, req, &r)
}

// Top asks for the keys closest to their limits now.
func (c *Client) Top(ctx context.Context, req TopRequest) (*Top, error) {
	q := url.Values{}
	if req.Rule != "" {
		q.Set("rule", req.Rule)
	}
	if req.By != "" {
		q.Set("by", req.By)
	}
	if req.N > 0 {
		q.Set("n", strconv.Itoa(req.N))
	}
	var t Top
	return &t, c.do(ctx, http.MethodGet, "/v1/top", q, nil, &t)
}

// List asks for the bans q selects.
func (c *Client) List(ctx context.Context, q ListQuery) (*BanList, error) {
	var l BanList
	return &l, c.do(ctx, http.MethodGet, "/v1/bans", q.values(), nil, &l)
}

// History asks for the history of an address, CIDR or key.
func (c *Client) History(ctx context.Context, key string) (*History, error) {
	var h History
	return &h, c.do(ctx, http.MethodGet, "/v1/history", url.Values{"key": {key}}, nil, &h)
}

// Breaker asks for the circuit breaker's state and its last trips and
// resets.
func (c *Client) Breaker(ctx context.Context) (*BreakerStatus, error) {
	var b BreakerStatus
	return &b, c.do(ctx, http.MethodGet, "/v1/breaker", nil, nil, &b)
}

// ResetBreaker asks the daemon to reset the circuit breaker.
func (c *Client) ResetBreaker(ctx context.Context) (*BreakerResetResult, error) {
	var r BreakerResetResult
	return &r, c.do(ctx, http.MethodPost, "/v1/breaker/reset", nil, struct{}{}, &r)
}

// Clean asks the daemon to run one cleaner pass now; it answers once
// every action undid the bans it lifted.
func (c *Client) Clean(ctx context.Context, req CleanRequest) (*CleanReport, error) {
	var r CleanReport
	return &r, c.do(ctx, http.MethodPost, "/v1/clean", nil, req, &r)
}
