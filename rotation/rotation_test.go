package rotation

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"

	"github.com/logjail/logjail/internal/testenv"
)

// TestParse: every name logrotate, nginx's and Apache's `mv`, and savelog
// give a rotated access log is a sibling; other logs are not.
func TestParse(t *testing.T) {
	base := "/var/log/nginx/access.log"
	for _, tc := range []struct {
		name   string
		olddir string
		want   Name
		ok     bool
	}{
		{name: base, want: Name{Path: base}, ok: true},
		{name: base + ".1", want: Name{Path: base + ".1", Index: 1}, ok: true},
		{name: base + ".12.gz", want: Name{Path: base + ".12.gz", Index: 12, Compression: Gzip}, ok: true},
		{name: base + ".2.bz2", want: Name{Path: base + ".2.bz2", Index: 2, Compression: Bzip2}, ok: true},
		{name: base + ".3.xz", want: Name{Path: base + ".3.xz", Index: 3, Compression: XZ}, ok: true},
		{name: base + ".4.zst", want: Name{Path: base + ".4.zst", Index: 4, Compression: Zstd}, ok: true},
		{name: base + "-20261124", want: Name{Path: base + "-20261124", Date: "20261124"}, ok: true},
		{name: base + "-20261124.gz", want: Name{Path: base + "-20261124.gz", Date: "20261124", Compression: Gzip}, ok: true},
		{name: base + "-20261124-1764000000.zst", want: Name{Path: base + "-20261124-1764000000.zst", Date: "202611241764000000", Compression: Zstd}, ok: true},
		{name: base + "-2026112412", want: Name{Path: base + "-2026112412", Date: "2026112412"}, ok: true},
		{name: base + ".2026-11-24", want: Name{Path: base + ".2026-11-24", Date: "20261124"}, ok: true},
		{name: base + "_2026-11-24.xz", want: Name{Path: base + "_2026-11-24.xz", Date: "20261124", Compression: XZ}, ok: true},
		{name: base + ".gz", want: Name{Path: base + ".gz", Compression: Gzip}, ok: true},
		{name: "/var/log/nginx/old/access.log.1.gz", olddir: "old", want: Name{Path: "/var/log/nginx/old/access.log.1.gz", Index: 1, Compression: Gzip}, ok: true},
		{name: "/srv/archive/access.log-20261124", olddir: "/srv/archive", want: Name{Path: "/srv/archive/access.log-20261124", Date: "20261124"}, ok: true},
		{name: "/var/log/nginx/old/access.log.1", ok: false},              // olddir not configured
		{name: "/var/log/nginx/old/access.log", olddir: "old", ok: false}, // another log of that name
		{name: "/var/log/nginx/access.logx", ok: false},
		{name: base + ".old", ok: false},
		{name: base + ".", ok: false},
		{name: base + ".1.gz.tmp", ok: false},
		{name: base + ".gz.1", ok: false},
		{name: "/var/log/nginx/error.log", ok: false},
		{name: "/var/log/apache2/access.log.1", ok: false},
	} {
		got, ok := Parse(tc.name, base, tc.olddir)
		if ok != tc.ok {
			t.Errorf("Parse(%q, olddir %q): ok %v, want %v", tc.name, tc.olddir, ok, tc.ok)
			continue
		}
		if diff := cmp.Diff(tc.want, got); ok && diff != "" {
			t.Errorf("Parse(%q) (-want +got):\n%s", tc.name, diff)
		}
	}
}

// TestSiblingsOrder: the siblings come oldest first, one per rotated file,
// from the log's directory and its olddir.
func TestSiblingsOrder(t *testing.T) {
	dir := t.TempDir()
	base := filepath.Join(dir, "access.log")
	old := filepath.Join(dir, "old")
	if err := os.Mkdir(old, 0o755); err != nil {
		t.Fatal(err)
	}
	mk := func(name string) {
		if err := os.WriteFile(name, []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"access.log", "access.log.1", "access.log.2.gz", "access.log.3.bz2", "access.log.1.gz", "error.log.1", "access.log.old"} {
		mk(filepath.Join(dir, n))
	}
	mk(filepath.Join(old, "access.log.4.zst"))
	if err := os.Mkdir(filepath.Join(dir, "access.log.5"), 0o755); err != nil { // a directory is no sibling
		t.Fatal(err)
	}
	got, err := Siblings(base, "old")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range got {
		names = append(names, strings.TrimPrefix(n.Path, dir+"/"))
	}
	want := []string{"old/access.log.4.zst", "access.log.3.bz2", "access.log.2.gz", "access.log.1"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("Siblings (-want +got):\n%s", diff)
	}

	// dateext: by date, and the finer dateformat after the day's.
	dir2 := t.TempDir()
	base2 := filepath.Join(dir2, "access.log")
	for _, n := range []string{"access.log-20261124.gz", "access.log-20261122", "access.log-20261123.xz"} {
		mk(filepath.Join(dir2, n))
	}
	got, err = Siblings(base2, "")
	if err != nil {
		t.Fatal(err)
	}
	names = nil
	for _, n := range got {
		names = append(names, filepath.Base(n.Path))
	}
	if diff := cmp.Diff([]string{"access.log-20261122", "access.log-20261123.xz", "access.log-20261124.gz"}, names); diff != "" {
		t.Errorf("dated siblings (-want +got):\n%s", diff)
	}

	// Two schemes side by side: by modification time.
	a := Name{Path: "a.1", Index: 1, ModTime: time.Unix(200, 0)}
	b := Name{Path: "a-20261124", Date: "20261124", ModTime: time.Unix(100, 0)}
	if Compare(b, a) >= 0 || Compare(a, b) <= 0 {
		t.Errorf("mixed schemes: want the older modification time first")
	}
}

// TestDecompress: every compression logrotate offers reads back as the
// text, with the same fingerprint as the plain file; plain text passes.
func TestDecompress(t *testing.T) {
	text := []byte("203.0.113.1 - - [24/Nov/2026:10:00:00 +0000] \"GET / HTTP/1.1\" 200 1\nsecond line\n")
	var gz, zs, x bytes.Buffer
	gw := gzip.NewWriter(&gz)
	gw.Write(text)
	gw.Close()
	zw, _ := zstd.NewWriter(&zs)
	zw.Write(text)
	zw.Close()
	xw, _ := xz.NewWriter(&x)
	xw.Write(text)
	xw.Close()
	cases := map[string][]byte{None: text, Gzip: gz.Bytes(), Zstd: zs.Bytes(), XZ: x.Bytes()}
	if path, err := exec.LookPath("bzip2"); err == nil {
		cmd := exec.Command(path, "-c")
		cmd.Stdin = bytes.NewReader(text)
		out, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		cases[Bzip2] = out
	} else if testenv.CI() {
		t.Errorf("bzip2 not installed: bzip2 reading is not tested (CI=true)")
	} else {
		t.Log("bzip2 not installed: bzip2 reading is not tested")
	}
	want, _ := Head(text)
	for format, data := range cases {
		r, got, err := Decompress(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		if got != format {
			t.Errorf("format %q detected as %q", format, got)
		}
		fp, complete, err := Fingerprint(r)
		if err != nil || !complete || fp != want {
			t.Errorf("%s: fingerprint %q complete %v err %v, want %q", format, fp, complete, err, want)
		}
		r.Close()
		r, _, _ = Decompress(bytes.NewReader(data))
		all, err := io.ReadAll(r)
		if err != nil || !bytes.Equal(all, text) {
			t.Errorf("%s: read %q, %v", format, all, err)
		}
		if format != None && !Binary(data) {
			t.Errorf("%s: not taken for binary", format)
		}
	}
	if Binary(text) || !Binary([]byte("ab\x00cd\n")) || Binary([]byte("\x00\x00\x00203.0.113.1 - -\n")) {
		t.Errorf("Binary: text, NUL among text, leading hole misjudged")
	}
}

// FuzzParse: Parse never panics, a sibling's name starts with its base's
// and lives beside it or in the olddir, and Bases finds that base again.
func FuzzParse(f *testing.F) {
	for _, s := range []string{".1", ".12.gz", "-20261124", "-20261124-1764000000.zst", ".2026-11-24", "_1.xz", ".gz", ".old", "", ".", "-", ".1.gz.1", ".bz2", "x"} {
		f.Add(s, "")
		f.Add(s, "old")
	}
	f.Fuzz(func(t *testing.T, suffix, olddir string) {
		base := "/var/log/nginx/access.log"
		name := base + suffix
		n, ok := Parse(name, base, olddir)
		if !ok {
			return
		}
		if !strings.HasPrefix(n.Path, filepath.Clean(base)) && n.Path != filepath.Clean(name) {
			t.Fatalf("Parse(%q) = %+v", name, n)
		}
		if n.Path == filepath.Clean(base) || strings.ContainsRune(suffix, '/') {
			return
		}
		found := false
		for _, b := range Bases(name, "", "") {
			found = found || b == base
		}
		if !found {
			t.Fatalf("Bases(%q) = %q: not %q", name, Bases(name, "", ""), base)
		}
	})
}
