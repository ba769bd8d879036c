package daemon

import (
	"context"

	"github.com/logjail/logjail/follow"
	"github.com/logjail/logjail/rules"
	"github.com/logjail/logjail/stream"
)

// readStream reads a source that is no set of files (package stream)
// until ctx is done, sending its batches on out: a journald source from
// just after its saved cursor (its position, stream.JournaldPath), a
// syslog source from what arrives once it listens (it has no catch-up).
// Their batches go through the same parsing, guard, pipeline and
// checkpoints as a file's; the position saved for a journald batch holds
// its cursor (follow.Batch.After).
func (d *decider) readStream(ctx context.Context, src *rules.Source, out chan<- follow.Batch) error {
	log := d.log.With("source", src.Name)
	switch src.Type {
	case rules.SourceJournald:
		return stream.Journald(ctx, stream.JournaldOptions{
			Name: src.Name, Matches: src.Stream.Match,
			Directory: src.Stream.JournalDirectory, Files: src.Stream.JournalFiles,
			From: d.positions[stream.JournaldPath(src.Name)], FromStart: src.From == "start",
			Logger: log,
		}, out)
	default: // rules.SourceSyslog
		s, err := stream.ListenSyslog(stream.SyslogOptions{
			Name: src.Name, Listen: src.Stream.Listen, Peers: src.Stream.Peers, Tag: src.Stream.Tag,
			SocketGroup: src.Stream.SocketGroup, Logger: log,
		})
		if err != nil {
			return err
		}
		defer s.Close()
		log.Info("syslog source listening", "addr", s.Addr().String())
		return s.Run(ctx, out)
	}
}
