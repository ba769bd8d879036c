package rules

import (
	"net/netip"
	"testing"
)

func TestExampleLoads(t *testing.T) {
	c, err := Parse("example.yaml", Example(), Options{HostAddrs: []netip.Addr{}, Cores: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Sources) != 1 || c.Sources[0].Name != "web" {
		t.Fatalf("sources: %+v", c.Sources)
	}
}
