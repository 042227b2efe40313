package cli

import (
	"net"
	"net/netip"
	"strings"
	"testing"
)

// The address serve advertises to the other serve processes, and the
// Host name the proxied requests carry.
func TestDefaultAdvertise(t *testing.T) {
	for _, tc := range []struct {
		listen string
		want   func(string) bool
	}{
		{"127.0.0.1:7878", func(s string) bool { return s == "http://127.0.0.1:7878" }},
		{"[::1]:9000", func(s string) bool { return s == "http://[::1]:9000" }},
		{"10.1.2.3:80", func(s string) bool { return s == "http://10.1.2.3:80" }},
		// A wildcard host becomes an address (or the host name) others can
		// reach, never the wildcard.
		{"0.0.0.0:7878", func(s string) bool {
			return strings.HasPrefix(s, "http://") && strings.HasSuffix(s, ":7878") && !strings.Contains(s, "0.0.0.0")
		}},
		{"[::]:7878", func(s string) bool { return strings.HasSuffix(s, ":7878") && !strings.Contains(s, "[::]") }},
	} {
		addr := net.TCPAddrFromAddrPort(netip.MustParseAddrPort(tc.listen))
		if got := defaultAdvertise(addr); !tc.want(got) {
			t.Errorf("defaultAdvertise(%s) = %q", tc.listen, got)
		}
	}
	for in, want := range map[string]string{
		"":                             "",
		"http://10.0.0.5:7878":         "",
		"http://[fd00::1]:7878":        "",
		"https://serve-a.internal:443": "serve-a.internal",
		"http://serve-b:7878/":         "serve-b",
	} {
		if got := advertiseHost(in); got != want {
			t.Errorf("advertiseHost(%q) = %q, want %q", in, got, want)
		}
	}
}
