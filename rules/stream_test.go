package rules

import (
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestStreamSources: journald and syslog sources decode into Type and
// Stream; a syslog source without listen listens on loopback; a relative
// journal directory is relative to the configuration.
func TestStreamSources(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "logjail.yaml")
	text := `sources:
  - name: journal
    type: journald
    match: [_SYSTEMD_UNIT=nginx.service, SYSLOG_IDENTIFIER=nginx]
    journal_directory: journal
    from: start
  - name: udp
    type: syslog
    tag: nginx
    log_format: '$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent'
  - name: remote
    type: syslog
    listen: udp://0.0.0.0:5140
    peers: [203.0.113.0/24]
  - name: sock
    type: syslog
    listen: unix:///run/logjail/syslog.sock
    socket_group: www-data
  - name: files
    paths: [/var/log/nginx/access.log]
`
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(cfg, testOptions)
	if err != nil {
		t.Fatal(err)
	}
	type got struct {
		Type   string
		From   string
		Stream Stream
	}
	want := []got{
		{SourceJournald, "start", Stream{Match: []string{"_SYSTEMD_UNIT=nginx.service", "SYSLOG_IDENTIFIER=nginx"}, JournalDirectory: filepath.Join(dir, "journal")}},
		{SourceSyslog, "end", Stream{Listen: DefaultSyslogListen, Tag: "nginx"}},
		{SourceSyslog, "end", Stream{Listen: "udp://0.0.0.0:5140", Peers: []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")}}},
		{SourceSyslog, "end", Stream{Listen: "unix:///run/logjail/syslog.sock", SocketGroup: "www-data"}},
		{SourceFile, "end", Stream{}},
	}
	var have []got
	for _, s := range c.Sources {
		have = append(have, got{s.Type, s.From, s.Stream})
	}
	if diff := cmp.Diff(want, have, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
		t.Errorf("sources (-want +got):\n%s", diff)
	}
}
