package ops

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"syscall"
)

// NewLogger returns the daemon's one logger, writing to w: slog's text
// handler when w is a terminal (a person reads it), JSON lines otherwise
// (journald, a collector). level is debug, info, warn or error; anything
// else is an error, and the logger returned with it logs at error level so
// that a caller that goes on anyway is not silent.
//
// When w is the stream systemd connected to the journal ($JOURNAL_STREAM
// names its device and inode, systemd.exec(5)), each line starts with its
// syslog priority as sd-daemon(3) prefixes it (<7> debug, <6> info, <4>
// warn, <3> error): journald strips it and files the line under that
// priority, so `journalctl -p warning` and a syslog forwarder see the
// levels, and the message stays one JSON object.
func NewLogger(w io.Writer, level string, terminal bool) (*slog.Logger, error) {
	return newLogger(w, level, terminal, journalStream(w, os.Getenv("JOURNAL_STREAM")))
}

func newLogger(w io.Writer, level string, terminal, journal bool) (*slog.Logger, error) {
	var lvl slog.Level
	var err error
	switch strings.ToLower(strings.TrimSpace(level)) {
	case "debug":
		lvl = slog.LevelDebug
	case "info", "":
		lvl = slog.LevelInfo
	case "warn", "warning":
		lvl = slog.LevelWarn
	case "error":
		lvl = slog.LevelError
	default:
		lvl = slog.LevelError
		err = fmt.Errorf("log level %q: want debug, info, warn or error", level)
	}
	o := &slog.HandlerOptions{Level: lvl}
	var h slog.Handler
	switch {
	case terminal:
		h = slog.NewTextHandler(w, o)
	case journal:
		h = newJournalHandler(w, o)
	default:
		h = slog.NewJSONHandler(w, o)
	}
	return slog.New(h), err
}

// journalStream reports whether w is the file that env ($JOURNAL_STREAM,
// "DEVICE:INODE") names.
func journalStream(w io.Writer, env string) bool {
	f, ok := w.(*os.File)
	if !ok || env == "" {
		return false
	}
	fi, err := f.Stat()
	if err != nil {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && env == fmt.Sprintf("%d:%d", st.Dev, st.Ino)
}

// journalHandler writes JSON lines, each prefixed with its record's
// syslog priority: one JSON handler for each priority, all writing through
// one lock.
type journalHandler struct {
	hs [4]slog.Handler // debug, info, warn, error
}

func newJournalHandler(w io.Writer, o *slog.HandlerOptions) journalHandler {
	mu := &sync.Mutex{}
	var h journalHandler
	for i, p := range []string{"<7>", "<6>", "<4>", "<3>"} {
		h.hs[i] = slog.NewJSONHandler(&prefixWriter{w: w, mu: mu, prefix: p}, o)
	}
	return h
}

func (h journalHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.hs[0].Enabled(ctx, l)
}

func (h journalHandler) Handle(ctx context.Context, r slog.Record) error {
	i := 0
	switch {
	case r.Level >= slog.LevelError:
		i = 3
	case r.Level >= slog.LevelWarn:
		i = 2
	case r.Level >= slog.LevelInfo:
		i = 1
	}
	return h.hs[i].Handle(ctx, r)
}

func (h journalHandler) WithAttrs(as []slog.Attr) slog.Handler {
	for i := range h.hs {
		h.hs[i] = h.hs[i].WithAttrs(as)
	}
	return h
}

func (h journalHandler) WithGroup(name string) slog.Handler {
	for i := range h.hs {
		h.hs[i] = h.hs[i].WithGroup(name)
	}
	return h
}

// prefixWriter writes each line with prefix before it, in one write.
type prefixWriter struct {
	w      io.Writer
	mu     *sync.Mutex // shared by the handlers writing to w
	prefix string
	buf    []byte // under mu
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.buf = append(append(p.buf[:0], p.prefix...), b...)
	if _, err := p.w.Write(p.buf); err != nil {
		return 0, err
	}
	return len(b), nil
}
