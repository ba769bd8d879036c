package testenv

import (
	"net"
	"strconv"
	"testing"
)

// TestFreePortBelowEphemeral: the ports FreePort gives are bindable and
// never from the kernel's ephemeral range, where a listener on ":0" or a
// connection's source port could take them next.
func TestFreePortBelowEphemeral(t *testing.T) {
	lo := ephemeralLow()
	for range 50 {
		p := FreePort(t)
		if p < 10000 || p >= lo {
			t.Fatalf("port %d: outside [10000, %d)", p, lo)
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Fatalf("port %d is not free: %v", p, err)
		}
		l.Close()
	}
}
