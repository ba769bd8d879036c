package stream

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/user"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/logjail/logjail/follow"
	"github.com/logjail/logjail/source"
	"golang.org/x/sys/unix"
)

// SyslogOptions say where a syslog source listens and what it takes.
type SyslogOptions struct {
	Name string // the source's name: its batches' Path is SyslogPath(Name)
	// Listen is udp://ADDRESS:PORT (an IP literal) or unix:///path (a
	// datagram socket): ParseListen.
	Listen string
	// Peers are the addresses a UDP datagram is taken from; nil: the
	// loopback addresses only. Datagrams from others are counted
	// (SyslogStats.Refused) and dropped.
	Peers []netip.Prefix
	// Tag, if set, takes only the messages of this RFC 3164 TAG or RFC 5424
	// APP-NAME (nginx's tag=, "nginx" by default); the others are counted
	// (SyslogStats.OtherTag).
	Tag string
	// SocketGroup is the group given a unix socket (mode 0660), so that
	// the web server's workers may send to it; "" keeps the process's.
	SocketGroup string
	MaxBatch    int          // most lines a batch (default follow.DefaultMaxBatch)
	Logger      *slog.Logger // may be nil
}

// SyslogPath is the batch path of syslog source name.
func SyslogPath(name string) string { return "syslog:" + name }

// ParseListen reads a syslog source's listen address: udp://IP:PORT (a
// bare IP:PORT is UDP too) or unix:///absolute/path. It returns the
// network ("udp" or "unixgram") and address for net.ListenPacket. Port
// 0 is any free port (the tests'; the configuration refuses it).
func ParseListen(s string) (network, address string, err error) {
	rest, isUnix := strings.CutPrefix(s, "unix://")
	if isUnix {
		if !strings.HasPrefix(rest, "/") {
			return "", "", fmt.Errorf("%q: want unix:///absolute/path", s)
		}
		return "unixgram", rest, nil
	}
	rest, _ = strings.CutPrefix(s, "udp://")
	ap, err := netip.ParseAddrPort(rest)
	if err != nil {
		return "", "", fmt.Errorf("%q: want udp://IP:PORT (an address, not a name) or unix:///path", s)
	}
	return "udp", ap.String(), nil
}

// SyslogStats counts a syslog source's datagrams.
type SyslogStats struct {
	Received  uint64 // datagrams read
	Lines     uint64 // messages handed on as lines
	Malformed uint64 // datagrams that are no syslog message
	Refused   uint64 // UDP datagrams from an address not in Peers
	OtherTag  uint64 // messages of another tag than Tag
}

// Syslog is a listening syslog source. It is safe to call Stats and Close
// from any goroutine while Run runs.
type Syslog struct {
	o     SyslogOptions
	conn  net.PacketConn
	log   *slog.Logger
	path  string
	udp   bool
	peers []netip.Prefix
	stats struct{ received, lines, malformed, refused, otherTag atomic.Uint64 }
	// The malformed count and the first error since the last warning.
	warned    time.Time
	warnedAt  uint64
	lastError error
}

// loopback are the peers of a UDP source without Peers.
var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}

// ListenSyslog opens o's socket. A unix socket's stale file (a socket
// left by an earlier run) is replaced; any other file there is an error.
func ListenSyslog(o SyslogOptions) (*Syslog, error) {
	network, addr, err := ParseListen(o.Listen)
	if err != nil {
		return nil, fmt.Errorf("syslog source %q: listen %w", o.Name, err)
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = follow.DefaultMaxBatch
	}
	s := &Syslog{o: o, log: o.Logger, path: SyslogPath(o.Name), udp: network == "udp", peers: o.Peers}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.peers == nil {
		s.peers = loopback
	}
	if !s.udp {
		if fi, err := os.Lstat(addr); err == nil {
			if fi.Mode()&os.ModeSocket == 0 {
				return nil, fmt.Errorf("syslog source %q: %s exists and is no socket", o.Name, addr)
			}
			if err := os.Remove(addr); err != nil {
				return nil, fmt.Errorf("syslog source %q: %w", o.Name, err)
			}
		}
	}
	var lc net.ListenConfig
	conn, err := lc.ListenPacket(context.Background(), network, addr)
	if err != nil {
		return nil, fmt.Errorf("syslog source %q: %w", o.Name, err)
	}
	s.conn = conn
	if !s.udp {
		if err := s.socketAccess(addr); err != nil {
			conn.Close()
			return nil, err
		}
	}
	// A burst waits in the kernel while a batch is being handed on.
	if rc, ok := conn.(interface{ SetReadBuffer(int) error }); ok {
		rc.SetReadBuffer(4 << 20)
	}
	return s, nil
}

// socketAccess gives the unix socket mode 0660 and SocketGroup: who may
// send is who may write the socket file (the kernel checks it).
func (s *Syslog) socketAccess(path string) error {
	if s.o.SocketGroup != "" {
		g, err := user.LookupGroup(s.o.SocketGroup)
		if err != nil {
			return fmt.Errorf("syslog source %q: socket_group: %w", s.o.Name, err)
		}
		gid, _ := strconv.Atoi(g.Gid)
		if err := os.Chown(path, -1, gid); err != nil {
			return fmt.Errorf("syslog source %q: %w", s.o.Name, err)
		}
	}
	if err := os.Chmod(path, 0o660); err != nil {
		return fmt.Errorf("syslog source %q: %w", s.o.Name, err)
	}
	return nil
}

// Addr is the address listened on (a UDP port 0 resolved).
func (s *Syslog) Addr() net.Addr { return s.conn.LocalAddr() }

// Close closes the socket (and removes a unix socket's file).
func (s *Syslog) Close() error {
	err := s.conn.Close()
	if !s.udp {
		os.Remove(s.conn.LocalAddr().String())
	}
	return err
}

// Stats returns the counts so far.
func (s *Syslog) Stats() SyslogStats {
	return SyslogStats{Received: s.stats.received.Load(), Lines: s.stats.lines.Load(),
		Malformed: s.stats.malformed.Load(), Refused: s.stats.refused.Load(), OtherTag: s.stats.otherTag.Load()}
}

// Run reads datagrams until ctx is done, sending their messages on out in
// batches (it never closes out): every datagram waiting in the socket is
// read before a batch is sent, up to MaxBatch lines. It never makes a
// sender wait: what arrives while a batch is handed on waits in the
// socket's buffer (4 MiB asked for), and what does not fit there is
// dropped by the kernel, as UDP syslog is. It returns ctx.Err(), or the
// socket's error. Lines are numbered from 1 in the order read; Offset
// counts the messages' bytes (each plus one for its end); the batch's
// File is no file (its Size is the last line's Offset).
func (s *Syslog) Run(ctx context.Context, out chan<- follow.Batch) error {
	stop := context.AfterFunc(ctx, func() { s.conn.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	rc, err := s.conn.(interface {
		SyscallConn() (syscall.RawConn, error)
	}).SyscallConn()
	if err != nil {
		return err
	}
	buf := make([]byte, 64<<10)
	var line, offset int64
	var b follow.Batch
	for {
		var rerr error
		err := rc.Read(func(fd uintptr) bool {
			for len(b.Lines) < s.o.MaxBatch {
				n, from, err := unix.Recvfrom(int(fd), buf, unix.MSG_DONTWAIT)
				switch {
				case err == unix.EINTR:
					continue
				case err == unix.EAGAIN:
					return len(b.Lines) > 0 // nothing yet: wait for the socket
				case err != nil:
					rerr = err
					return true
				}
				if text, ok := s.take(buf[:n], from); ok {
					line++
					offset += int64(len(text)) + 1
					b.Lines = append(b.Lines, follow.Line{Text: text, Line: line, Offset: offset})
				}
			}
			return true
		})
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err == nil {
			err = rerr
		}
		if err != nil {
			return fmt.Errorf("syslog source %q: %w", s.o.Name, err)
		}
		s.warn()
		if len(b.Lines) == 0 {
			continue
		}
		b.Path, b.File = s.path, source.FileID{Size: offset}
		select {
		case out <- b:
		case <-ctx.Done():
			return ctx.Err()
		}
		b = follow.Batch{Lines: make([]follow.Line, 0, len(b.Lines))}
	}
}

// take checks and parses one datagram: its message's text, or false.
func (s *Syslog) take(d []byte, from unix.Sockaddr) (string, bool) {
	s.stats.received.Add(1)
	if s.udp && !s.peer(from) {
		s.stats.refused.Add(1)
		return "", false
	}
	m, err := ParseMessage(d)
	if err != nil {
		if s.stats.malformed.Add(1) == 1 || s.lastError == nil {
			s.lastError = err
		}
		return "", false
	}
	if s.o.Tag != "" && m.Tag != s.o.Tag {
		s.stats.otherTag.Add(1)
		return "", false
	}
	s.stats.lines.Add(1)
	text := m.Text
	if len(text) > source.MaxLine {
		text = text[:source.MaxLine]
	}
	return string(text), true
}

// peer says whether a UDP datagram's sender is one of Peers.
func (s *Syslog) peer(from unix.Sockaddr) bool {
	var a netip.Addr
	switch sa := from.(type) {
	case *unix.SockaddrInet4:
		a = netip.AddrFrom4(sa.Addr)
	case *unix.SockaddrInet6:
		a = netip.AddrFrom16(sa.Addr).Unmap()
	default:
		return false
	}
	for _, p := range s.peers {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// warn logs the malformed datagrams at most once a minute.
func (s *Syslog) warn() {
	n := s.stats.malformed.Load()
	if n == s.warnedAt || time.Since(s.warned) < time.Minute {
		return
	}
	s.log.Warn("syslog: malformed datagrams dropped", "source", s.o.Name, "datagrams", n-s.warnedAt,
		"total", n, "first", s.lastError)
	s.warned, s.warnedAt, s.lastError = time.Now(), n, nil
}
