"""Which addresses a target may be reached at: every check made before a connection (issue 34).

A target's host is either a name, resolved once per call, or an address written the one way
:mod:`ipaddress` reads it (dotted decimal, or IPv6 in brackets). Each address the name resolves to, or
the written one, is refused when it is one the service itself, the platform or the network around it
answers on, unless the operator declared a CIDR for the target that holds it::

    refused whatever is declared     168.63.129.16 (Azure's platform endpoint), 169.254.169.254 (metadata),
                                     0.0.0.0/8, the unspecified and multicast addresses
    refused unless declared          private (10/8, 172.16/12, 192.168/16), CGNAT 100.64/10, link-local,
                                     unique-local fc00::/7, reserved, documentation, benchmarking
    refused as IPv6 forms of IPv4    IPv4-mapped ::ffff:0:0/96, IPv4-compatible ::/96, NAT64 64:ff9b::/96
                                     and 64:ff9b:1::/48, 6to4 2002::/16, Teredo 2001::/32
    loopback                         only with ONCEGATE_TARGETS_ALLOW_LOOPBACK=true (local development
                                     and tests), never by a declared CIDR

A declared CIDR lets a target reach a private endpoint or a VNet; it never brings back loopback, the
platform's own addresses or the IPv6 forms of IPv4 (:func:`check_cidr` refuses such a declaration).
"""

from __future__ import annotations

import ipaddress
import re

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

# Azure's platform endpoint (DNS, DHCP, health probes) and the instance metadata service.
PLATFORM = (ipaddress.ip_address("168.63.129.16"), ipaddress.ip_address("169.254.169.254"))
NEVER = (ipaddress.ip_network("0.0.0.0/8"), ipaddress.ip_network("::/128"))
# IPv6 ranges that carry an IPv4 address inside: refused as a whole, whatever the address inside.
IPV4_INSIDE = tuple(
    ipaddress.ip_network(net)
    for net in ("::ffff:0:0/96", "::/96", "64:ff9b::/96", "64:ff9b:1::/48", "2002::/16", "2001::/32")
)
CGNAT = ipaddress.ip_network("100.64.0.0/10")
LOOPBACK = (ipaddress.ip_network("127.0.0.0/8"), ipaddress.ip_network("::1/128"))
# A host made only of digits, dots and hex or octal spellings: an address written a way only some readers read
# (inet_aton's 2130706433, 0x7f.1, 0177.0.0.1, 127.1), never a name.
NUMERIC_HOST = re.compile(r"^(0x[0-9a-f]*|[0-9]+)(\.(0x[0-9a-f]*|[0-9]*))*\.?$", re.IGNORECASE)


class AddressRefused(ValueError):
    """An address or host a target may not be reached at; the message says why, never a secret."""


def written_address(host: str) -> IPAddress | None:
    """The address a URL's host writes, None for a name; raises ``AddressRefused`` for odd spellings.

    ``host`` is as :func:`urllib.parse.urlsplit` gives it (no brackets). Only dotted decimal IPv4 with four
    parts and no leading zeros, and IPv6, are addresses; a host of digits otherwise (decimal, hex, octal,
    fewer parts) is refused rather than resolved, since resolvers read it as an address.
    """
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0] if ":" in host else host)
    except ValueError:
        if NUMERIC_HOST.match(host):
            raise AddressRefused(f"the host {host!r} is an address spelled in a way that is refused") from None
        return None
    if ":" in host and "%" in host:
        raise AddressRefused("an IPv6 address with a zone is refused")
    return address


def refusal(address: IPAddress, *, allowed: tuple[IPNetwork, ...] = (), allow_loopback: bool = False) -> str | None:
    """Why ``address`` may not be reached (a sentence), or None when it may."""
    if address in PLATFORM or _within(address, NEVER) or address.is_multicast:
        return f"{address} is the platform's own address or none at all"
    if _within(address, LOOPBACK):
        return None if allow_loopback else f"{address} is loopback (ONCEGATE_TARGETS_ALLOW_LOOPBACK is off)"
    if _within(address, IPV4_INSIDE):
        return f"{address} is an IPv6 form of an IPv4 address"
    if _within(address, allowed):
        return None
    if _within(address, (CGNAT,)) or address.is_private or address.is_link_local or address.is_reserved:
        return f"{address} is private, link-local or reserved and not in a CIDR declared for the target"
    if not address.is_global:
        return f"{address} is not a public address and not in a CIDR declared for the target"
    return None


def _within(address: IPAddress, networks: tuple[IPNetwork, ...]) -> bool:
    # ipaddress compares the integers alone: an IPv4 address is "in" ::/96 unless the versions are checked.
    return any(address.version == net.version and address in net for net in networks)


def check_cidr(text: str) -> IPNetwork:
    """A declared CIDR as a network; raises ``AddressRefused`` for one that is not, or that holds loopback
    or the platform's addresses (0.0.0.0/0 among them)."""
    try:
        network = ipaddress.ip_network(text.strip(), strict=True)
    except ValueError as exc:
        raise AddressRefused(f"{text!r} is not a CIDR such as 10.20.0.0/16 ({exc})") from None
    if any(address.version == network.version and address in network for address in PLATFORM):
        raise AddressRefused(f"{text} holds the platform's own addresses, which no target may reach")
    if any(network.version == net.version and network.overlaps(net) for net in (*LOOPBACK, *NEVER, *IPV4_INSIDE)):
        raise AddressRefused(f"{text} overlaps loopback, 0.0.0.0/8 or an IPv6 form of IPv4, which no CIDR may open")
    return network
