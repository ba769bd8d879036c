// Package journaltest writes real journal files for the journald source's
// tests: the entries are fed, in the journal export format, to systemd's
// own systemd-journal-remote (Debian package systemd-journal-remote,
// installed by scripts/deps.sh), which writes (or appends to) a journal
// file that journalctl reads with --file or --directory. There is no
// running systemd-journald on a build machine or in CI's container, so
// the tests cannot log through one (systemd-cat, a journald namespace):
// a journal file written by the real tools is the real journal they read.
//
// Boundaries: It only writes journal files; it skips (fails under
// CI=true) where the tools are missing, through internal/testenv.
package journaltest

import (
	"bytes"
	"encoding/binary"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/logjail/logjail/internal/testenv"
)

// Entry is one journal entry: its fields (MESSAGE, _SYSTEMD_UNIT, …).
// Time is its __REALTIME_TIMESTAMP (the zero time: now).
type Entry struct {
	Time   time.Time
	Fields map[string]string
}

// Message is an entry with MESSAGE=text and the fields kv (pairs).
func Message(text string, kv ...string) Entry {
	e := Entry{Fields: map[string]string{"MESSAGE": text}}
	for i := 0; i+1 < len(kv); i += 2 {
		e.Fields[kv[i]] = kv[i+1]
	}
	return e
}

// Remote is the path of systemd-journal-remote; it skips t (fails under
// CI) when it is not installed, nor journalctl.
func Remote(t testing.TB) string {
	t.Helper()
	testenv.Need(t, "journalctl")
	for _, p := range []string{"/lib/systemd/systemd-journal-remote", "/usr/lib/systemd/systemd-journal-remote"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	testenv.Skip(t, "systemd-journal-remote is not installed (scripts/deps.sh installs package systemd-journal-remote as root)")
	return ""
}

// Export is entries in the journal export format: a field whose value
// holds a newline or is no text is written in the format's binary form
// (name, newline, 64-bit little-endian length, the bytes).
func Export(entries []Entry) []byte {
	var b bytes.Buffer
	for _, e := range entries {
		at := e.Time
		if at.IsZero() {
			at = time.Now()
		}
		b.WriteString("__REALTIME_TIMESTAMP=" + strconv.FormatInt(at.UnixMicro(), 10) + "\n")
		for k, v := range e.Fields {
			if strings.ContainsAny(v, "\n") || !isText(v) {
				b.WriteString(k + "\n")
				binary.Write(&b, binary.LittleEndian, uint64(len(v)))
				b.WriteString(v + "\n")
				continue
			}
			b.WriteString(k + "=" + v + "\n")
		}
		b.WriteString("\n")
	}
	return b.Bytes()
}

func isText(s string) bool {
	for _, c := range []byte(s) {
		if c < 0x20 && c != '\t' {
			return false
		}
	}
	return true
}

// Write appends entries to the journal file path (its name ends in
// .journal), creating it if need be, with systemd-journal-remote.
func Write(t testing.TB, path string, entries ...Entry) {
	t.Helper()
	cmd := exec.Command(Remote(t), "--output="+path, "-")
	cmd.Stdin = bytes.NewReader(Export(entries))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("systemd-journal-remote --output=%s: %v\n%s", path, err, out)
	}
}
