package stream_test

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/logjail/logjail/follow"
	"github.com/logjail/logjail/internal/journaltest"
	"github.com/logjail/logjail/stream"
)

func benchLine(i int) string {
	return fmt.Sprintf(`198.51.100.%d - - [25/Nov/2026:18:30:00 +0000] "GET /products/%d HTTP/1.1" 200 612 "-" "Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0"`, i%250, i)
}

// BenchmarkJournald: lines/s of a journald source reading a journal of
// 20,000 nginx entries (and as many of another unit, which the match
// leaves out) from its start: journalctl's work and this package's
// together, as the daemon would catch up after downtime.
func BenchmarkJournald(b *testing.B) {
	const n = 20000
	dir := b.TempDir()
	var es []journaltest.Entry
	t0 := time.Now().Add(-time.Hour)
	for i := range n {
		es = append(es,
			journaltest.Entry{Time: t0.Add(time.Duration(2*i) * time.Millisecond), Fields: map[string]string{"MESSAGE": benchLine(i), "_SYSTEMD_UNIT": "nginx.service"}},
			journaltest.Entry{Time: t0.Add(time.Duration(2*i+1) * time.Millisecond), Fields: map[string]string{"MESSAGE": "other", "_SYSTEMD_UNIT": "cron.service"}})
	}
	journaltest.Write(b, filepath.Join(dir, "system.journal"), es...)
	b.ReportAllocs()
	lines := 0
	start := time.Now()
	for b.Loop() {
		ctx, cancel := context.WithCancel(context.Background())
		out := make(chan follow.Batch, 4)
		done := make(chan error, 1)
		go func() {
			done <- stream.Journald(ctx, stream.JournaldOptions{Name: "web", Directory: dir, FromStart: true,
				Matches: []string{"_SYSTEMD_UNIT=nginx.service"}}, out)
		}()
		for got := 0; got < n; {
			bt := <-out
			got += len(bt.Lines)
			lines += len(bt.Lines)
		}
		cancel()
		<-done
	}
	b.ReportMetric(float64(lines)/time.Since(start).Seconds(), "lines/s")
}

// BenchmarkSyslogUnix and BenchmarkSyslogUDP: lines/s of a syslog source
// taking nginx's RFC 3164 datagrams, over a unix datagram socket and over
// UDP on loopback, sent in windows of 64 datagrams, each window waited
// for (the kernel drops none).
func BenchmarkSyslogUnix(b *testing.B) {
	benchSyslog(b, "unix://"+filepath.Join(b.TempDir(), "s.sock"), "unixgram")
}

func BenchmarkSyslogUDP(b *testing.B) { benchSyslog(b, "udp://127.0.0.1:0", "udp") }

func benchSyslog(b *testing.B, listen, network string) {
	var ds [][]byte
	for i := range 1024 {
		ds = append(ds, []byte("<190>Nov 25 18:30:00 web1 nginx: "+benchLine(i)))
	}
	s, err := stream.ListenSyslog(stream.SyslogOptions{Name: "web", Listen: listen, Tag: "nginx"})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := make(chan follow.Batch, 4)
	go s.Run(ctx, out)
	var got atomic.Int64
	go func() { // the daemon's side: batches taken as they come
		for {
			select {
			case bt := <-out:
				got.Add(int64(len(bt.Lines)))
			case <-ctx.Done():
				return
			}
		}
	}()
	c, err := net.Dial(network, s.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	const window = 64
	b.ReportAllocs()
	b.SetBytes(int64(len(ds[0])))
	var sent int64
	start := time.Now()
	for b.Loop() {
		if _, err := c.Write(ds[sent%int64(len(ds))]); err != nil {
			b.Fatal(err)
		}
		sent++
		if sent%window == 0 {
			wait(b, &got, sent, s)
		}
	}
	wait(b, &got, sent, s)
	b.ReportMetric(float64(got.Load())/time.Since(start).Seconds(), "lines/s")
	if st := s.Stats(); st.Malformed != 0 || st.Lines != uint64(sent) {
		b.Errorf("stats %+v after %d lines", st, sent)
	}
}

// wait waits until the source has handed on want lines.
func wait(b *testing.B, got *atomic.Int64, want int64, s *stream.Syslog) {
	deadline := time.Now().Add(10 * time.Second)
	for got.Load() < want {
		if time.Now().After(deadline) {
			b.Fatalf("%d lines of %d sent in 10 s: %+v", got.Load(), want, s.Stats())
		}
		runtime.Gosched()
	}
}
