// Package stream is the sources that are no set of files: the systemd
// journal (`type: journald`) and syslog datagrams (`type: syslog`). Each
// produces follow.Batch values, as package follow does for files, so the
// daemon's dispatcher, parsers, guard, pipeline and checkpoints take them
// unchanged: a line is an access-log line, whatever carried it.
//
// # journald
//
// Journald runs journalctl (argv, never a shell):
//
//	journalctl --output=json --output-fields=MESSAGE --all --follow --merge --quiet --no-pager
//	    [--directory=DIR] [--file=F...] (--after-cursor=C --no-tail | --no-tail | --lines=0) -- MATCH...
//
// and hands out each entry's MESSAGE as a line, with the entry's cursor
// (follow.Batch.Cursors). Why journalctl rather than linking libsystemd
// (sd_journal through cgo, or a Go reader of the journal file format):
//   - logjail under its systemd unit stays a plain process: no cgo
//     dependency on libsystemd.so (the binary builds and runs where
//     libsystemd is absent or another version), and nothing of ours parses
//     journal files, whose format (compact mode, compression, keyed hashes)
//     follows systemd's version.
//   - The hardening is the same either way: reading the system journal
//     takes membership of the group systemd-journal (or adm) and read
//     access to /var/log/journal and /run/log/journal, which
//     ProtectSystem=strict leaves readable. journalctl is one fork at start
//     (and at a restart), and needs no capability and no address family
//     the unit does not already allow (AF_UNIX). contrib/systemd's
//     drop-in (`logjail check --systemd`) adds SupplementaryGroups=
//     systemd-journal when a journald source is configured. A process
//     outside those groups sees only its own entries: Journald says so at
//     start (a warning), as journalctl would (--quiet silences its hint).
//   - The cost is journalctl's JSON: about a microsecond an entry to read
//     here, and journalctl's own time; the benchmark (BenchmarkJournald)
//     measures the two together.
//
// Matches are journalctl's: FIELD=value each (CheckMatch: a field name of
// [A-Z0-9_], not starting with a digit, so that no match can be read as an
// option; after "--" all the same); entries of different fields must all
// match, of the same field any (journalctl's rule).
//
// Positions. The position of a journald source is saved under the path
// JournaldPath(name), "journald:NAME", in the store's positions table as
// it is: its HeadHash holds the cursor of the last entry processed (no
// store change: the column is text); Line counts the entries read, and
// Offset their bytes (each message plus one), across restarts; Dev and
// Inode are zero. follow.Batch.After puts each line's cursor in the
// position, so that a line the daemon's guard holds is read again after a
// restart, and nothing after it twice. At start the source resumes with
// --after-cursor: every entry written while logjail was stopped is read
// once, as a file's lines are (TestJournaldRestartExactlyOnce in package
// daemon). Without a saved cursor it starts at the journal's end (`from:
// end`, --lines=0) or its start (`from: start`, --no-tail). --merge: a
// plain --follow shows only the current boot, and the entries of a boot
// that ended while logjail was down would be skipped.
//
// A journalctl that exits or dies is started again from the last cursor
// read, after a wait that doubles from MinBackoff (1 s) to MaxBackoff
// (1 min) and starts over once a run has read an entry or lasted longer
// than MaxBackoff; each exit is logged (Warn) with journalctl's last
// words. A batch is handed out as soon as journalctl has written nothing
// more, or at MaxBatch lines; the journal pipe then waits: nothing queues
// without bound. A MESSAGE that is not valid UTF-8 text is written by
// journalctl as an array of bytes, and is read as those bytes; a message
// larger than journalctl shows (--all shows every size) or an entry
// without MESSAGE is skipped. A trailing newline is dropped.
//
// # syslog
//
// ListenSyslog listens on udp://IP:PORT or unix:///path (a datagram
// socket), loopback by default (rules.DefaultSyslogListen), for nginx's
// `access_log syslog:server=...` and anything else that sends syslog.
// ParseMessage reads RFC 3164 headers (what nginx and syslog(3) send:
// `<PRI>Mmm dd hh:mm:ss HOSTNAME TAG: MSG`, the hostname optional) and RFC
// 5424 headers (`<PRI>1 TIMESTAMP HOST APP PROCID MSGID SD MSG`,
// structured data skipped); the message is the line. The header's time is
// not used: the access-log line carries its own, and the detector runs on
// log time.
//
// Who may send: for UDP, the sender's address must be one of `peers`
// (default: loopback only; a listen address that is not loopback must list
// them), others are counted and dropped (SyslogStats.Refused); for a unix
// socket, whoever may write its file: it is made 0660 with the group
// `socket_group` (the web server's, www-data on Debian), and the kernel
// checks it. `tag:` keeps only one sender's messages (nginx's tag=).
//
// The socket is never a reason for a sender to wait: Run reads every
// datagram waiting (recvfrom with MSG_DONTWAIT) into one batch and hands
// it on; while the daemon is slow, datagrams wait in the socket's buffer
// (4 MiB asked for), and past it the kernel drops them, as UDP syslog
// does. Malformed datagrams are counted (SyslogStats.Malformed) and
// logged at most once a minute with the first one's error.
//
// A syslog source has no catch-up: what is sent while logjail is down is
// lost (the README says so), so its configuration takes no `from:`. Its
// batches carry the path SyslogPath(name), "syslog:NAME" (the guard's and
// the position's key), with lines numbered in arrival order; the position
// the daemon saves for it is never used to resume.
//
// Replay. A journald source's old lines are replayed by piping journalctl
// into replay: `journalctl -o cat --output-fields=MESSAGE
// _SYSTEMD_UNIT=nginx.service --since ... --until ... | logjail replay
// --source NAME -`. A syslog source has no history of its own: replay the
// files the web server also writes, or a capture with the syslog headers
// stripped.
//
// Boundaries: It owns reading the journal and syslog sockets into batches
// of lines. It must not parse the lines (the daemon's pipeline does), nor
// decide anything, nor read the configuration (the daemon hands it its
// options).
package stream
