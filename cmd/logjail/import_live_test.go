package main

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// v6Addresses writes n addresses of 2001:db8::/32, one a line, to a file
// in dir.
func v6Addresses(t testing.TB, dir string, n int) string {
	t.Helper()
	var b strings.Builder
	for i := range n {
		a := netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 14: byte(i >> 8), 15: byte(i)})
		b.WriteString(a.String() + "\n")
	}
	p := filepath.Join(dir, fmt.Sprintf("v6-%d.txt", n))
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestImportExportLive: against a running daemon, an import of 2,000
// entries is one request (BenchmarkImport10k times 10,000), in every action when the command returns; a
// file with a bad line and a dry run change nothing; export reads what
// the daemon banned, and import reads it back.
func TestImportExportLive(t *testing.T) {
	e := newOpEnv(t)
	e.start()

	// A bad line: nothing applied, the line named.
	bad := filepath.Join(e.dir, "bad.txt")
	os.WriteFile(bad, []byte("203.0.113.7\n203.0.113.0/33\n198.51.100.9\n"), 0o644)
	if code, _, stderr := e.cmd("import", bad); code != exitNegative || !strings.Contains(stderr, bad+`:2: value: "203.0.113.0/33": not an address or CIDR`) {
		t.Errorf("bad file: exit %d: %s", code, stderr)
	}
	// A dry run: nothing applied.
	e.must(0, "import", "testdata/import/plain.txt", "--dry-run")
	if l := e.list(); len(l.Bans) != 0 || e.blockFile("203.0.113.7") {
		t.Fatalf("a bad file or a dry run banned %v (block file %v)", banKeys(l), e.blockFile("203.0.113.7"))
	}

	// 2,000 entries, one request.
	file := v6Addresses(t, e.dir, 2_000)
	out := e.must(0, "import", file, "--for", "2h", "--reason", "blocklist")
	if !strings.Contains(out, "banned 2000 keys") || !strings.Contains(out, "applied by the daemon in every action") {
		t.Errorf("import said:\n%s", out)
	}
	if !e.blockFile("2001:db8::1") || !e.blockFile("2001:db8::7cf") || !e.denied("2001:db8::7cf") {
		t.Errorf("after import returned: block files %v %v, deny line %v; want all", e.blockFile("2001:db8::1"), e.blockFile("2001:db8::7cf"), e.denied("2001:db8::7cf"))
	}
	if n := strings.Count(e.out.String(), `"msg":"operator batch ban"`); n != 1 || !strings.Contains(e.out.String(), `"bans":2000`) {
		t.Errorf("the daemon logged %d batch requests, want one of 2000 bans", n)
	}
	if l := e.list(); len(l.Bans) != 2_000 {
		t.Fatalf("list: %d bans, want 2000", len(l.Bans))
	}

	// Export from the daemon's database, lift everything, import it back.
	e.must(0, "import", "testdata/import/cscli-list.json")
	before := e.list()
	for _, format := range exportFormats {
		exported := e.must(0, "export", "-o", format)
		f := filepath.Join(e.dir, "export."+format)
		os.WriteFile(f, []byte(exported), 0o644)
		if n := strings.Count(exported, "2001:db8::"); n < 2_000 {
			t.Errorf("export -o %s: %d of the v6 addresses, want 2000", format, n)
		}
	}
	e.must(0, "unban", "--all")
	if e.blockFile("2001:db8::1") {
		t.Fatalf("unban --all left the block file")
	}
	e.must(0, "import", filepath.Join(e.dir, "export.crowdsec"))
	after := e.list()
	if diff := cmpStrings(banKeys(before), banKeys(after)); diff != "" {
		t.Errorf("export -o crowdsec, unban --all, import (-want +got):\n%s", diff)
	}
	if !e.blockFile("2001:db8::1") || !e.blockFile("203.0.113.7") {
		t.Errorf("after the import of the export: block files %v %v", e.blockFile("2001:db8::1"), e.blockFile("203.0.113.7"))
	}
	e.stop()
}

// BenchmarkImport10k times `logjail import` of 10,000 addresses: through
// a running daemon (one request, one checkpoint) with no action and with
// a block file action (10,000 files written, each atomically), and with
// no daemon (one transaction on the database).
func BenchmarkImport10k(b *testing.B) {
	for _, actions := range []string{"", "blockfile"} {
		name := "daemon"
		if actions != "" {
			name += "+" + actions
		}
		b.Run(name, func(b *testing.B) {
			dir := b.TempDir()
			cfg := ioConfig(b, dir)
			if actions != "" {
				f, err := os.OpenFile(cfg, os.O_APPEND|os.O_WRONLY, 0)
				if err != nil {
					b.Fatal(err)
				}
				fmt.Fprintf(f, "actions:\n  - type: blockfile\n    dir: %s/blocked\n", dir)
				f.Close()
			}
			os.WriteFile(filepath.Join(dir, "access.log"), nil, 0o644)
			file := v6Addresses(b, dir, 10_000)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan int, 1)
			go func() {
				done <- execute(ctx, []string{"run", "--config", cfg, "--poll"}, streams{in: strings.NewReader(""), out: io.Discard, err: io.Discard})
			}()
			defer func() {
				cancel()
				<-done
			}()
			deadline := time.Now().Add(30 * time.Second)
			for !daemonAnswers(cfg) {
				if time.Now().After(deadline) {
					b.Fatal("the daemon did not answer")
				}
				time.Sleep(50 * time.Millisecond)
			}
			benchImport(b, cfg, file, "applied by the daemon")
		})
	}
	b.Run("database", func(b *testing.B) {
		dir := b.TempDir()
		cfg := ioConfig(b, dir)
		benchImport(b, cfg, v6Addresses(b, dir, 10_000), "written to the database")
	})
}

// daemonAnswers reports whether status comes from a running daemon.
func daemonAnswers(cfg string) bool {
	var out strings.Builder
	execute(context.Background(), []string{"status", "--config", cfg}, streams{out: &out, err: io.Discard})
	return strings.Contains(out.String(), "running (pid")
}

func benchImport(b *testing.B, cfg, file, want string) {
	b.ReportAllocs()
	for b.Loop() {
		var out, errb strings.Builder
		if code := execute(context.Background(), []string{"import", file, "--for", "2h", "--config", cfg}, streams{out: &out, err: &errb}); code != 0 || !strings.Contains(out.String(), want) {
			b.Fatalf("import: exit %d\n%s%s", code, out.String(), errb.String())
		}
	}
}
