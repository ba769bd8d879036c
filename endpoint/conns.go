package endpoint

import (
	"container/list"
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Accept back-off: after a failed Accept the listener waits from
// minAcceptBackoff, doubling, up to maxAcceptBackoff, then tries again; it
// never gives up while the listener is open.
const (
	minAcceptBackoff = 5 * time.Millisecond
	maxAcceptBackoff = time.Second
)

// acceptFailing is how long Accept must have failed without one success
// before Err reports the endpoint as unhealthy.
const acceptFailing = 10 * time.Second

// limitListener is the endpoint's listener: it holds at most max
// connections, and when a new one would exceed that, or Accept fails for
// want of file descriptors (EMFILE, ENFILE), it closes the connection that
// has gone longest without progress (an idle keep-alive connection, a
// client that sends nothing or sends its headers a byte at a time). A
// connection that has just opened, begun a request or been answered is
// the last to go: idle and slow clients cannot starve a proxy that asks.
// Accept errors never end serving: it backs off and tries again, logging
// at most once a minute. Safe for concurrent use.
type limitListener struct {
	net.Listener
	max  int
	log  *slog.Logger
	now  func() time.Time
	done chan struct{} // closed by Close

	mu    sync.Mutex
	conns list.List // of *trackedConn, least recently answered first
	// acceptErr is the last Accept error; failingSince is when Accept
	// started failing (zero: its last call succeeded).
	acceptErr    error
	failingSince time.Time
	logged       time.Time // when an accept error or eviction was last logged
	closeOnce    sync.Once

	accepted, evicted, acceptErrors atomic.Int64
}

func newLimitListener(l net.Listener, maxConns int, log *slog.Logger, now func() time.Time) *limitListener {
	return &limitListener{Listener: l, max: maxConns, log: log, now: now, done: make(chan struct{})}
}

// Accept returns the next connection; it returns an error only once the
// listener is closed or no longer listens (permanent).
func (l *limitListener) Accept() (net.Conn, error) {
	backoff := time.Duration(0)
	for {
		c, err := l.Listener.Accept()
		if err == nil {
			return l.track(c), nil
		}
		if errors.Is(err, net.ErrClosed) || permanent(err) {
			return nil, err
		}
		select {
		case <-l.done:
			return nil, net.ErrClosed
		default:
		}
		l.acceptErrors.Add(1)
		l.mu.Lock()
		now := l.now()
		l.acceptErr = err
		if l.failingSince.IsZero() {
			l.failingSince = now
		}
		// Out of descriptors: free one held by the least useful
		// connection, and try again at once.
		freed := (errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)) && l.evictLocked()
		if now.Sub(l.logged) >= time.Minute {
			l.logged = now
			l.log.Warn("endpoint: accept failed; retrying", "err", err, "conns", l.conns.Len(), "accept_errors", l.acceptErrors.Load())
		}
		l.mu.Unlock()
		if freed {
			continue
		}
		backoff = min(max(2*backoff, minAcceptBackoff), maxAcceptBackoff)
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-l.done:
			t.Stop()
			return nil, net.ErrClosed
		}
	}
}

// permanent reports an accept error that no retry can cure: the socket
// is no longer listening (shut down: EINVAL) or is no socket.
func permanent(err error) bool {
	return errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.EBADF) || errors.Is(err, syscall.ENOTSOCK) || errors.Is(err, syscall.EOPNOTSUPP)
}

// track registers a new connection, evicting the least useful one when the
// limit is reached.
func (l *limitListener) track(c net.Conn) net.Conn {
	l.accepted.Add(1)
	tc := &trackedConn{Conn: c, l: l}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failingSince, l.acceptErr = time.Time{}, nil
	for l.conns.Len() >= l.max {
		if !l.evictLocked() {
			break
		}
		if now := l.now(); now.Sub(l.logged) >= time.Minute {
			l.logged = now
			l.log.Warn("endpoint: connection limit reached; closing the connections longest without a request", "max_conns", l.max)
		}
	}
	tc.elem = l.conns.PushBack(tc)
	return tc
}

// evictLocked closes the connection that has gone longest without
// completing a request; false when there is none.
func (l *limitListener) evictLocked() bool {
	e := l.conns.Front()
	if e == nil {
		return false
	}
	tc := e.Value.(*trackedConn)
	l.conns.Remove(e)
	tc.elem = nil
	l.evicted.Add(1)
	// Closing unblocks the server's read on it; the server then drops it.
	tc.Conn.Close()
	return true
}

// touch moves c to the back of the eviction order: its request has
// begun, or has just been answered.
func (l *limitListener) touch(c *trackedConn) {
	l.mu.Lock()
	if c.elem != nil {
		l.conns.MoveToBack(c.elem)
	}
	l.mu.Unlock()
}

// Close closes the listener; Accept returns net.ErrClosed.
func (l *limitListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// failing returns the accept error and since when Accept has failed
// without a success (zero when its last call succeeded).
func (l *limitListener) failing() (error, time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.acceptErr, l.failingSince
}

func (l *limitListener) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.conns.Len()
}

// trackedConn is a connection the limitListener holds.
type trackedConn struct {
	net.Conn
	l    *limitListener
	elem *list.Element // guarded by l.mu; nil once removed
}

// Close removes the connection from its listener's set and closes it.
func (c *trackedConn) Close() error {
	c.l.mu.Lock()
	if c.elem != nil {
		c.l.conns.Remove(c.elem)
		c.elem = nil
	}
	c.l.mu.Unlock()
	return c.Conn.Close()
}
