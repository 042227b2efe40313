// Package netguard keeps Maestro's outbound HTTP (the web tools) away from
// addresses a model must not reach: the host itself, the private network,
// link-local and cloud metadata endpoints, and the other special-purpose
// ranges. A destination is checked after DNS resolution and again when the
// socket connects (a net.Dialer Control hook, so a DNS answer that changes
// between the check and the connection is still caught), on every
// redirect; only http and https are spoken; responses are bounded in size,
// time and redirects. docs/web-tools.md describes the policy.
package netguard

import "net/netip"

// Address classes, as BlockedError.Class and the firewall_block event name
// them.
const (
	ClassUnspecified    = "unspecified"
	ClassLoopback       = "loopback"
	ClassPrivate        = "private"
	ClassCGNAT          = "cgnat"
	ClassLinkLocal      = "link_local"
	ClassMetadata       = "cloud_metadata"
	ClassMulticast      = "multicast"
	ClassBroadcast      = "broadcast"
	ClassReserved       = "reserved"
	ClassDocumentation  = "documentation"
	ClassIPv4Mapped     = "ipv4_mapped"
	ClassIPv4Compatible = "ipv4_compatible"
	ClassULA            = "unique_local"
	ClassNAT64          = "nat64"
	ClassTranslated     = "ipv4_translation" // 6to4 and Teredo embed an IPv4 address
	ClassInvalid        = "invalid"
)

// rangeClass is one refused range.
type rangeClass struct {
	prefix netip.Prefix
	class  string
}

// refusedRanges lists the refused ranges, most specific first: the first
// match names the class (the metadata addresses before link-local and
// unique-local, which hold them).
func refusedRanges() []rangeClass {
	p := netip.MustParsePrefix
	return []rangeClass{
		{p("169.254.169.254/32"), ClassMetadata},
		{p("fd00:ec2::254/128"), ClassMetadata},
		{p("255.255.255.255/32"), ClassBroadcast},
		{p("0.0.0.0/8"), ClassUnspecified},
		{p("::/128"), ClassUnspecified},
		{p("127.0.0.0/8"), ClassLoopback},
		{p("::1/128"), ClassLoopback},
		{p("10.0.0.0/8"), ClassPrivate},
		{p("172.16.0.0/12"), ClassPrivate},
		{p("192.168.0.0/16"), ClassPrivate},
		{p("100.64.0.0/10"), ClassCGNAT},
		{p("169.254.0.0/16"), ClassLinkLocal},
		{p("fe80::/10"), ClassLinkLocal},
		{p("224.0.0.0/4"), ClassMulticast},
		{p("ff00::/8"), ClassMulticast},
		{p("192.0.2.0/24"), ClassDocumentation},
		{p("198.51.100.0/24"), ClassDocumentation},
		{p("203.0.113.0/24"), ClassDocumentation},
		{p("2001:db8::/32"), ClassDocumentation},
		{p("3fff::/20"), ClassDocumentation},
		{p("192.0.0.0/24"), ClassReserved},  // IETF protocol assignments
		{p("198.18.0.0/15"), ClassReserved}, // benchmarking
		{p("240.0.0.0/4"), ClassReserved},
		{p("100::/64"), ClassReserved}, // discard-only
		{p("::ffff:0:0/96"), ClassIPv4Mapped},
		{p("::/96"), ClassIPv4Compatible},
		{p("64:ff9b::/96"), ClassNAT64},
		{p("64:ff9b:1::/48"), ClassNAT64},
		{p("2002::/16"), ClassTranslated},
		{p("2001::/32"), ClassTranslated},
		{p("fc00::/7"), ClassULA},
	}
}

// Classify returns the class of a refused address, or "" for an ordinary
// public unicast address. An IPv4-mapped IPv6 address is refused as such,
// whatever it maps to; a zone (fe80::1%eth0) does not change the class.
func (g *Guard) Classify(a netip.Addr) string {
	if !a.IsValid() {
		return ClassInvalid
	}
	a = a.WithZone("")
	for _, r := range g.ranges {
		if r.prefix.Contains(a) {
			return r.class
		}
	}
	return ""
}
