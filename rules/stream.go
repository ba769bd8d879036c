package rules

import (
	"net/netip"
	"path/filepath"
	"strings"

	"github.com/logjail/logjail/stream"
	"gopkg.in/yaml.v3"
)

// Source types (Source.Type).
const (
	SourceFile     = "file"     // paths: the files of one format (package follow)
	SourceJournald = "journald" // the journal's entries, through journalctl (package stream)
	SourceSyslog   = "syslog"   // datagrams on a UDP port or a unix socket (package stream)
)

// Stream is what a journald or a syslog source reads (Source.Type): the
// keys a file source does not have.
type Stream struct {
	// journald
	Match            []string // journalctl matches, FIELD=value (stream.CheckMatch)
	JournalDirectory string   // journalctl --directory, "" for the system's journal
	JournalFiles     []string // journalctl --file, each
	// syslog
	Listen      string         // udp://IP:PORT or unix:///path (stream.ParseListen); default DefaultSyslogListen
	Peers       []netip.Prefix // UDP senders taken; nil: loopback only
	Tag         string         // only this RFC 3164 TAG / RFC 5424 APP-NAME ("" any)
	SocketGroup string         // the unix socket's group
}

// DefaultSyslogListen is where a syslog source without `listen:` listens:
// loopback only.
const DefaultSyslogListen = "udp://127.0.0.1:5140"

// streamKeys are the source keys of journald and syslog sources, and
// which type each belongs to.
var streamKeys = map[string]string{
	"match": SourceJournald, "journal_directory": SourceJournald, "journal_files": SourceJournald,
	"listen": SourceSyslog, "peers": SourceSyslog, "tag": SourceSyslog, "socket_group": SourceSyslog,
}

// streamField decodes one of streamKeys into s.Stream; the type's
// agreement is checked once the source is read (checkStream).
func (b *builder) streamField(s *Source, f field) {
	st := &s.Stream
	switch f.key.Value {
	case "match":
		st.Match = b.strs(f.val, f.path)
		for i, m := range st.Match {
			if err := stream.CheckMatch(m); err != nil {
				b.errorf(f.val, index(f.path, i), "%v", err)
			}
		}
	case "journal_directory":
		if b.str(f.val, f.path, &st.JournalDirectory) && !filepath.IsAbs(st.JournalDirectory) {
			st.JournalDirectory = filepath.Join(b.dir, st.JournalDirectory)
		}
	case "journal_files":
		st.JournalFiles = b.strs(f.val, f.path)
		for i, p := range st.JournalFiles {
			if !filepath.IsAbs(p) {
				st.JournalFiles[i] = filepath.Join(b.dir, p)
			}
		}
	case "listen":
		if b.str(f.val, f.path, &st.Listen) {
			if network, addr, err := stream.ParseListen(st.Listen); err != nil {
				b.errorf(f.val, f.path, "%v", err)
			} else if network == "udp" && strings.HasSuffix(addr, ":0") {
				b.errorf(f.val, f.path, "%q: a port from 1 (the web server sends to a fixed one)", st.Listen)
			}
		}
	case "peers":
		st.Peers = []netip.Prefix{}
		for _, p := range b.prefixList(f.val, f.path) {
			st.Peers = append(st.Peers, p.Prefix)
		}
	case "tag":
		b.str(f.val, f.path, &st.Tag)
	case "socket_group":
		b.str(f.val, f.path, &st.SocketGroup)
	}
}

// checkStream checks that a source's keys fit its type, once it is read:
// fields are its keys by name, n its node.
func (b *builder) checkStream(s *Source, n *yaml.Node, path string, fields map[string]field) {
	for k, f := range fields {
		if t, ok := streamKeys[k]; ok && t != s.Type {
			b.errorf(f.key, f.path, "%s is a key of %s sources, not of type %s", k, t, s.Type)
		}
	}
	if s.Type == SourceFile {
		return
	}
	for _, k := range []string{"paths", "olddir"} {
		if f, ok := fields[k]; ok {
			b.errorf(f.key, f.path, "a %s source reads no files: remove %s", s.Type, k)
		}
	}
	if s.Type != SourceSyslog {
		return
	}
	if f, ok := fields["from"]; ok {
		b.errorf(f.key, f.path, "a syslog source has no catch-up (what arrives while logjail is down is lost): remove from")
	}
	if s.Stream.Listen == "" {
		s.Stream.Listen = DefaultSyslogListen
	}
	network, addr, err := stream.ParseListen(s.Stream.Listen)
	if err != nil {
		return // reported at listen
	}
	if network == "udp" && s.Stream.Peers == nil {
		if ap, err := netip.ParseAddrPort(addr); err == nil && !ap.Addr().IsLoopback() {
			at, atPath := n, path
			if f, ok := fields["listen"]; ok {
				at, atPath = f.val, f.path
			}
			b.errorf(at, atPath, "%q is no loopback address: list the senders in peers (anyone who can send a datagram could have addresses banned)", s.Stream.Listen)
		}
	}
	if network != "udp" && fields["peers"].key != nil {
		b.errorf(fields["peers"].key, fields["peers"].path, "peers are for UDP: who may send to a unix socket is who may write it (socket_group)")
	}
}
