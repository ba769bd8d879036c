package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// openPTY returns a new pseudo-terminal's two ends.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("no pseudo-terminal here: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(); m.Close() })
	return m, s
}

// TestParseOnATerminalSaysWhatItReads: parse with no file, its input a
// terminal, says that it reads the terminal and how to end, then reads the
// lines typed until Ctrl-D; from a pipe it says nothing of the kind.
func TestParseOnATerminalSaysWhatItReads(t *testing.T) {
	master, slave := openPTY(t)
	// A line, then Ctrl-D (end of input, in the terminal's canonical mode).
	if _, err := master.WriteString(combinedLine + "\n\x04"); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := execute(context.Background(), []string{"parse", "--format", "combined"}, streams{in: slave, out: &out, err: &errb})
	const said = "parse: reading log lines from the terminal: paste some and end with Ctrl-D"
	if code != exitOK || !strings.Contains(errb.String(), said) || !strings.Contains(out.String(), "203.0.113.7") {
		t.Errorf("parse on a terminal: exit %d, stdout %q, stderr %q; want exit 0, the line, and %q", code, out.String(), errb.String(), said)
	}
	_, _, stderr := run(t, combinedLine+"\n", "parse", "--format", "combined")
	if strings.Contains(stderr, said) {
		t.Errorf("parse from a pipe said %q", said)
	}
}
