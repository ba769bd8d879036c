package control

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
)

// cleaningDaemon is a fakeDaemon that can run a cleaner pass.
type cleaningDaemon struct {
	fakeDaemon
	asked []CleanRequest
	who   []string
}

func (f *cleaningDaemon) Clean(_ context.Context, req CleanRequest, who string) (*CleanReport, error) {
	f.asked = append(f.asked, req)
	f.who = append(f.who, who)
	return &CleanReport{Database: "/var/lib/logjail/logjail.db", Expired: 1, WALTruncated: true, Live: true,
		Unbans: []CleanUnban{{Rule: "flood", Key: "203.0.113.1"}}}, nil
}

// TestServerClean: POST /v1/clean reaches a daemon that can clean, with
// the request and the caller, and answers its report; a daemon that
// cannot answers 404, which the client reports as ErrNotFound.
func TestServerClean(t *testing.T) {
	ctx := context.Background()
	f := &cleaningDaemon{fakeDaemon: fakeDaemon{cfg: testCfg(t)}}
	_, c := serve(t, f)
	r, err := c.Clean(ctx, CleanRequest{VacuumPages: -1})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Live || r.Expired != 1 || len(r.Unbans) != 1 || r.Unbans[0].Key != "203.0.113.1" || !r.WALTruncated {
		t.Errorf("Clean = %+v", r)
	}
	me := Who(uint32(os.Getuid()), "")
	if len(f.asked) != 1 || f.asked[0].VacuumPages != -1 || !strings.HasPrefix(f.who[0], me) {
		t.Errorf("the daemon heard %+v from %v, want vacuum_pages -1 from %s", f.asked, f.who, me)
	}

	_, c = serve(t, &fakeDaemon{cfg: testCfg(t)})
	if _, err := c.Clean(ctx, CleanRequest{}); !errors.Is(err, ErrNotFound) {
		t.Errorf("Clean of a daemon without a cleaner: %v, want ErrNotFound", err)
	}
}
