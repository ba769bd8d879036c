package stream_test

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/logjail/logjail/follow"
	"github.com/logjail/logjail/stream"
)

// syslogRun runs s in the background and collects its lines.
type syslogRun struct {
	batches
	s *stream.Syslog
}

func runSyslog(t *testing.T, o stream.SyslogOptions) *syslogRun {
	t.Helper()
	if o.Name == "" {
		o.Name = "web"
	}
	s, err := stream.ListenSyslog(o)
	if err != nil {
		t.Fatal(err)
	}
	r := &syslogRun{batches: batches{t: t}, s: s}
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan follow.Batch)
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, out) }()
	r.collect(ctx, out, false)
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != context.Canceled {
				t.Errorf("Run returned %v, want context.Canceled", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Run did not return within 10 s of its context's end")
		}
		s.Close()
	})
	return r
}

func (r *syslogRun) waitLines(n int) []string {
	r.t.Helper()
	return r.batches.waitLines(n, func() string { return fmt.Sprintf("stats %+v", r.s.Stats()) })
}

func send(t *testing.T, network, addr string, datagrams ...string) {
	t.Helper()
	c, err := net.Dial(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, d := range datagrams {
		if _, err := c.Write([]byte(d)); err != nil {
			t.Fatal(err)
		}
	}
}

func nginxDatagram(line string) string { return "<190>Nov 25 18:30:00 web1 nginx: " + line }

// TestSyslogUDP: nginx's and RFC 5424 messages become lines; malformed
// datagrams and other tags are counted and dropped, in order.
func TestSyslogUDP(t *testing.T) {
	r := runSyslog(t, stream.SyslogOptions{Listen: "udp://127.0.0.1:0", Tag: "nginx"})
	addr := r.s.Addr().String()
	send(t, "udp", addr,
		"not syslog at all",
		nginxDatagram("line one"),
		"<13>Nov 25 18:30:00 web1 sshd[12]: Accepted publickey",
		"<190>1 2026-11-25T18:30:00Z web1 nginx - - - line two",
		"<999>Nov 25 18:30:00 web1 nginx: bad pri",
		nginxDatagram("line three\n"),
	)
	if diff := cmp.Diff([]string{"line one", "line two", "line three"}, r.waitLines(3)); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	want := stream.SyslogStats{Received: 6, Lines: 3, Malformed: 2, OtherTag: 1}
	if diff := cmp.Diff(want, r.s.Stats()); diff != "" {
		t.Errorf("stats (-want +got):\n%s", diff)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.paths["syslog:web"] || len(r.paths) != 1 {
		t.Errorf("batch paths %v, want syslog:web", r.paths)
	}
	for i, l := range r.lines {
		if l.Line != int64(i+1) {
			t.Errorf("line %d numbered %d", i, l.Line)
		}
	}
}

// TestSyslogRefusesOtherPeers: a UDP datagram from an address not in
// peers is counted and dropped.
func TestSyslogRefusesOtherPeers(t *testing.T) {
	r := runSyslog(t, stream.SyslogOptions{Listen: "udp://127.0.0.1:0", Peers: []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")}})
	send(t, "udp", r.s.Addr().String(), nginxDatagram("from loopback"))
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for r.s.Stats().Refused == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the datagram was not refused in 10 s: %+v", r.s.Stats())
		}
		<-tick.C
	}
	if got := r.texts(); len(got) != 0 {
		t.Errorf("lines %q from a refused peer", got)
	}
}

// TestSyslogUnixSocket: a unix datagram socket, made 0660, replacing the
// socket an earlier run left; a file that is no socket is not replaced.
func TestSyslogUnixSocket(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "syslog.sock")
	old, err := net.ListenPacket("unixgram", path) // what a crash leaves behind
	if err != nil {
		t.Fatal(err)
	}
	old.Close()
	r := runSyslog(t, stream.SyslogOptions{Listen: "unix://" + path})
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o660 || fi.Mode()&os.ModeSocket == 0 {
		t.Errorf("socket mode %v, want a socket 0660", fi.Mode())
	}
	send(t, "unixgram", path, "<14>Nov 25 18:30:00 nginx: "+accessLine)
	if diff := cmp.Diff([]string{accessLine}, r.waitLines(1)); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}

	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.ListenSyslog(stream.SyslogOptions{Name: "x", Listen: "unix://" + plain}); err == nil || !strings.Contains(err.Error(), "no socket") {
		t.Errorf("listening on a plain file: %v, want an error", err)
	}
	if b, _ := os.ReadFile(plain); string(b) != "keep me" {
		t.Errorf("the plain file was changed")
	}
}

// TestSyslogBurst: a burst of datagrams is read whole, in order, in
// batches of at most MaxBatch lines.
func TestSyslogBurst(t *testing.T) {
	r := runSyslog(t, stream.SyslogOptions{Listen: "udp://127.0.0.1:0", MaxBatch: 64})
	const n = 2000
	var ds []string
	for i := range n {
		ds = append(ds, nginxDatagram(fmt.Sprint("line ", i)))
	}
	send(t, "udp", r.s.Addr().String(), ds...)
	got := r.waitLines(n)
	for i, l := range got {
		if l != fmt.Sprint("line ", i) {
			t.Fatalf("line %d is %q", i, l)
		}
	}
}

func TestParseListen(t *testing.T) {
	for in, want := range map[string][2]string{
		"udp://127.0.0.1:5140":     {"udp", "127.0.0.1:5140"},
		"127.0.0.1:514":            {"udp", "127.0.0.1:514"},
		"udp://[::1]:5140":         {"udp", "[::1]:5140"},
		"unix:///run/logjail/sock": {"unixgram", "/run/logjail/sock"},
		"unix://relative":          {},
		"udp://localhost:5140":     {},
		"tcp://127.0.0.1:5140":     {},
		"udp://127.0.0.1":          {},
	} {
		n, a, err := stream.ParseListen(in)
		if (err == nil) != (want[0] != "") || n != want[0] || a != want[1] {
			t.Errorf("ParseListen(%q) = %q, %q, %v; want %q", in, n, a, err, want)
		}
	}
}
