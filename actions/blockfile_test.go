package actions

import (
	"bytes"
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var bfNow = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// bfBuild builds a blockfile action on dir, its clock at bfNow.
func bfBuild(t testing.TB, dir string) *blockfile {
	t.Helper()
	b, err := buildBlockfile(NewOptions("logjail.yaml", 0, "blockfile", map[string]any{"dir": dir}), Env{Now: func() time.Time { return bfNow }})
	if err != nil {
		t.Fatal(err)
	}
	return b.(*blockfile)
}

// bfList lists dir's names, sorted.
func bfList(t testing.TB, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, de := range des {
		out = append(out, de.Name())
	}
	slices.Sort(out)
	return out
}

func TestBlockfileNames(t *testing.T) {
	for _, tt := range []struct{ prefix, name string }{
		{"198.51.100.7/32", "198.51.100.7"},
		{"198.51.100.0/24", "198.51.100.0_24"},
		{"2001:db8::1/128", "2001:db8::1"},
		{"2001:db8:1::/64", "2001:db8:1::_64"},
		{"0.0.0.0/0", "0.0.0.0_0"},
	} {
		p := netip.MustParsePrefix(tt.prefix)
		if got := blockName(p); got != tt.name {
			t.Errorf("blockName(%s) = %q, want %q", p, got, tt.name)
		}
		if got, ok := parseBlockName(tt.name); !ok || got != p {
			t.Errorf("parseBlockName(%q) = %v, %v; want %v", tt.name, got, ok, p)
		}
	}
	// Names that are not ours: left alone.
	for _, name := range []string{
		"README", "index.html", ".hidden", "198.51.100.7_32", "198.51.100.1_24", "198.51.100.0_24_1",
		"2001:DB8::1", "2001:0db8::1", "fe80::1%eth0", "198.51.100.07", "198.51.100.7.bak", "_24", "",
	} {
		if p, ok := parseBlockName(name); ok {
			t.Errorf("parseBlockName(%q) = %v: want it not ours", name, p)
		}
	}
	for name, want := range map[string]bool{
		".198.51.100.7.tmp-123":  true,
		".2001:db8:1::_64.tmp-9": true,
		".README.tmp-1":          false,
		"198.51.100.7.tmp-1":     false,
	} {
		if got := blockTempName(name); got != want {
			t.Errorf("blockTempName(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestBlockfileContent(t *testing.T) {
	tests := []struct {
		name  string
		entry Entry
		want  string
	}{{
		name: "ban",
		entry: Entry{Prefix: netip.MustParsePrefix("198.51.100.7/32"), Kind: KindBan, Until: bfNow.Add(10 * time.Minute).In(time.FixedZone("x", 3600)),
			Rule: "login", Key: "198.51.100.7", Reason: "20 requests per 10s to /login"},
		want: "reason: 20 requests per 10s to /login\nrule: login\nkey: 198.51.100.7\nkind: ban\nuntil: 2025-03-01T12:10:00Z\nretry_after: 600\n",
	}, {
		name:  "until lifted",
		entry: Entry{Prefix: netip.MustParsePrefix("2001:db8:1::/64"), Kind: KindBan, Rule: "deny", Key: "2001:db8:1::/64", Reason: "deny list"},
		want:  "reason: deny list\nrule: deny\nkey: 2001:db8:1::/64\nkind: ban\nuntil: never\nretry_after: 0\n",
	}, {
		name: "throttle",
		entry: Entry{Prefix: netip.MustParsePrefix("203.0.113.5/32"), Kind: KindThrottle, Until: bfNow.Add(time.Minute), Delay: 2500 * time.Millisecond,
			Rule: "api", Key: "user:bob", Reason: "fast"},
		want: "reason: fast\nrule: api\nkey: user:bob\nkind: throttle\nuntil: 2025-03-01T12:01:00Z\nretry_after: 3\n",
	}, {
		name: "control characters",
		entry: Entry{Prefix: netip.MustParsePrefix("203.0.113.5/32"), Kind: KindBan, Until: bfNow.Add(time.Second / 2),
			Rule: "ua", Key: "ua:evil\nretry_after: 0", Reason: "a\rb\x00c\u2028d"},
		want: "reason: a b c d\nrule: ua\nkey: ua:evil retry_after: 0\nkind: ban\nuntil: 2025-03-01T12:00:00Z\nretry_after: 1\n",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			b := bfBuild(t, dir)
			if err := b.Apply(context.Background(), []Change{{Entry: tt.entry}}); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(filepath.Join(dir, blockName(tt.entry.Prefix)))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, string(got)); diff != "" {
				t.Errorf("content (-want +got):\n%s", diff)
			}
			if !blockCurrent(got, &tt.entry) {
				t.Error("blockCurrent: the file just written is not current")
			}
			if fi, err := os.Stat(filepath.Join(dir, blockName(tt.entry.Prefix))); err != nil || fi.Mode().Perm() != 0o640 {
				t.Errorf("mode %v %v, want 0640", fi.Mode(), err)
			}
		})
	}
}

func TestBlockfileSync(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	dir := filepath.Join(root, "blocked") // made by Sync
	b := bfBuild(t, dir)
	entries := []Entry{
		lfEntry("198.51.100.7"), lfEntry("198.51.100.0/24"), lfEntry("2001:db8::1"), lfEntry("2001:db8:1::/64"),
	}
	if err := b.Sync(ctx, entries, lfPrefixes("198.51.100.9")); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o711 {
		t.Fatalf("dir: %v %v, want 0711 (names tested, not listed)", fi.Mode(), err)
	}
	want := []string{"198.51.100.0_24", "198.51.100.7", "2001:db8:1::_64", "2001:db8::1"}
	if diff := cmp.Diff(want, bfList(t, dir)); diff != "" {
		t.Fatalf("files (-want +got):\n%s", diff)
	}

	// What another run, a crash and an operator left.
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("203.0.113.9", "reason: old\n")              // stale: removed
	write(".203.0.113.10.tmp-12345", "reason: half")   // a crash's temporary file: removed
	write("README", "what these files are\n")          // foreign: kept
	write("198.51.100.7_32", "an operator's spelling") // not a name of ours: kept
	write("2001:db8::1", "reason: old\nrule: x\n")     // changed: rewritten
	outside := filepath.Join(root, "precious")
	if err := os.WriteFile(outside, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "203.0.113.11")); err != nil { // a symlink: not followed, not removed
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "203.0.113.12"), 0o755); err != nil { // a directory: left
		t.Fatal(err)
	}
	current, err := os.Stat(filepath.Join(dir, "198.51.100.7"))
	if err != nil {
		t.Fatal(err)
	}

	b.now = func() time.Time { return bfNow.Add(time.Minute) } // retry_after would differ: not a change
	if err := b.Sync(ctx, entries, nil); err != nil {
		t.Fatal(err)
	}
	want = []string{"198.51.100.0_24", "198.51.100.7", "198.51.100.7_32", "2001:db8:1::_64", "2001:db8::1", "203.0.113.11", "203.0.113.12", "README"}
	if diff := cmp.Diff(want, bfList(t, dir)); diff != "" {
		t.Errorf("files after Sync (-want +got):\n%s", diff)
	}
	if got := lfRead(t, filepath.Join(dir, "2001:db8::1")); !strings.HasPrefix(got, "reason: too many logins\nrule: login\nkey: 2001:db8::1\n") {
		t.Errorf("the changed file is still\n%s", got)
	}
	if got := lfRead(t, filepath.Join(dir, "README")); got != "what these files are\n" {
		t.Errorf("README: %q", got)
	}
	if got := lfRead(t, outside); got != "keep" {
		t.Errorf("the symlink's target: %q", got)
	}
	if now, err := os.Stat(filepath.Join(dir, "198.51.100.7")); err != nil || !os.SameFile(current, now) {
		t.Errorf("a current file was rewritten (%v)", err)
	}

	// Idempotent: a second Sync changes nothing.
	before := map[string]os.FileInfo{}
	for _, n := range bfList(t, dir) {
		fi, _ := os.Lstat(filepath.Join(dir, n))
		before[n] = fi
	}
	if err := b.Sync(ctx, entries, nil); err != nil {
		t.Fatal(err)
	}
	for _, n := range bfList(t, dir) {
		fi, _ := os.Lstat(filepath.Join(dir, n))
		if before[n] == nil || !os.SameFile(before[n], fi) {
			t.Errorf("the second Sync replaced %s", n)
		}
	}

	// A Sync to nothing leaves the foreign files alone.
	if err := b.Sync(ctx, nil, nil); err != nil {
		t.Fatal(err)
	}
	want = []string{"198.51.100.7_32", "203.0.113.11", "203.0.113.12", "README"}
	if diff := cmp.Diff(want, bfList(t, dir)); diff != "" {
		t.Errorf("files after an empty Sync (-want +got):\n%s", diff)
	}
}

func TestBlockfileApply(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	b := bfBuild(t, dir)
	longer := lfEntry("198.51.100.7")
	longer.Until = bfNow.Add(time.Hour)
	steps := []struct {
		name    string
		changes []Change
		want    []string
	}{
		{"add", []Change{{Entry: lfEntry("198.51.100.7")}, {Entry: lfEntry("2001:db8:1::/64")}}, []string{"198.51.100.7", "2001:db8:1::_64"}},
		{"set again", []Change{{Entry: lfEntry("198.51.100.7")}}, []string{"198.51.100.7", "2001:db8:1::_64"}},
		{"longer", []Change{{Entry: longer}}, []string{"198.51.100.7", "2001:db8:1::_64"}},
		{"delete", []Change{{Entry: Entry{Prefix: lfEntry("2001:db8:1::/64").Prefix}, Delete: true}}, []string{"198.51.100.7"}},
		{"delete absent", []Change{{Entry: Entry{Prefix: lfEntry("2001:db8:1::/64").Prefix}, Delete: true}}, []string{"198.51.100.7"}},
	}
	for _, s := range steps {
		if err := b.Apply(ctx, s.changes); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if diff := cmp.Diff(s.want, bfList(t, dir)); diff != "" {
			t.Errorf("%s: files (-want +got):\n%s", s.name, diff)
		}
	}
	if got := lfRead(t, filepath.Join(dir, "198.51.100.7")); !strings.Contains(got, "until: 2025-03-01T13:00:00Z\nretry_after: 3600\n") {
		t.Errorf("after a longer ban:\n%s", got)
	}
	// A delete removes a regular file only.
	if err := os.Symlink("/etc/hostname", filepath.Join(dir, "203.0.113.7")); err != nil {
		t.Fatal(err)
	}
	if err := b.Apply(ctx, []Change{{Entry: Entry{Prefix: lfEntry("203.0.113.7").Prefix}, Delete: true}}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "203.0.113.7")); err != nil {
		t.Errorf("a delete removed a symlink: %v", err)
	}
}

// TestBlockfileAtomic reads a file while it is rewritten: every read is a
// whole file.
func TestBlockfileAtomic(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	b := bfBuild(t, dir)
	e := lfEntry("198.51.100.7")
	path := filepath.Join(dir, blockName(e.Prefix))
	done := make(chan struct{})
	var wg sync.WaitGroup
	var bad []string
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			data, err := os.ReadFile(path)
			if os.IsNotExist(err) {
				continue
			}
			if err != nil || !bytes.HasPrefix(data, []byte("reason: ")) || !bytes.Contains(data, []byte("\nretry_after: ")) || !bytes.HasSuffix(data, []byte("\n")) {
				bad = append(bad, string(data))
			}
		}
	}()
	for i := range 200 {
		e.Reason = strings.Repeat("x", i*37%4000)
		if err := b.Apply(ctx, []Change{{Entry: e}}); err != nil {
			t.Fatal(err)
		}
	}
	close(done)
	wg.Wait()
	if len(bad) > 0 {
		t.Errorf("%d reads saw a part of a file, e.g. %q", len(bad), bad[0])
	}
	if diff := cmp.Diff([]string{"198.51.100.7"}, bfList(t, dir)); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
}

func TestBlockfileFlush(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	b := bfBuild(t, dir)
	if err := b.Sync(ctx, lfEntries("198.51.100.7", "2001:db8:1::/64"), nil); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"README", ".198.51.100.8.tmp-1"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := bfBuild(t, dir).Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"README"}, bfList(t, dir)); diff != "" {
		t.Errorf("after Flush (-want +got):\n%s", diff)
	}
	// A directory never made: nothing to flush.
	if err := bfBuild(t, filepath.Join(dir, "none")).Flush(ctx); err != nil {
		t.Errorf("Flush of a missing directory: %v", err)
	}
}

// BenchmarkBlockfileApply10k applies 10,000 bans in one Apply (10,000
// files written), then removes them in another.
func BenchmarkBlockfileApply10k(b *testing.B) {
	bf := bfBuild(b, b.TempDir())
	add, del := lfBenchChanges(10000)
	benchApplyRemove(b, bf, add, del)
}
