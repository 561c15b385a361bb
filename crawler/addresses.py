"""Which IP addresses a crawl may connect to, enforced where the connection is made.

Layer: crawler. Imports the standard library and ``httpcore``; no HBase.

A page, a redirect or a robots.txt ``Sitemap:`` line can name any host; without a rule the
crawler would fetch (and index) a cloud metadata service (``169.254.169.254``), the
machine's own services (``127.0.0.1:9095``) or an intranet (``10.0.0.5``). This module is
that rule:

* ``address_kind(ip)`` classifies an address by the IANA IPv4 and IPv6 special-purpose
  registries, written out here (``_SPECIAL``; not ``ipaddress.is_global``, whose answers
  change with the Python patch release): None for a globally reachable one, else the name
  of its non-global kind (``ADDRESS_KINDS``): loopback, private (RFC 1918, RFC 4193),
  link-local (169.254/16, fe80::/10), shared (carrier-grade NAT, 100.64/10), multicast,
  unspecified, documentation, and reserved (every other registry entry that is not globally
  reachable, and IPv6 outside 2000::/3). IPv6 forms that carry an IPv4 address
  (IPv4-mapped ``::ffff:a.b.c.d``, IPv4-compatible ``::a.b.c.d``, IPv4-translated
  ``::ffff:0:a.b.c.d``, NAT64 ``64:ff9b::/96``, 6to4, Teredo) are classified by the address
  they carry.
* ``AddressPolicy`` says what a crawl may connect to: global addresses, never the cloud
  metadata endpoints (``METADATA_ENDPOINTS``: 169.254.169.254, fd00:ec2::254,
  100.100.100.200, Azure's global 168.63.129.16, ...) and, with
  ``--allow-private-addresses``, every address. Without it, the seeds' own addresses too:
  the seeds whose host is an IP literal (``http://127.0.0.1:8800/`` admits 127.0.0.1, on
  any port, since a local test web may have sites on several ports; not 127.0.0.2, not
  ``::1``) and ``localhost`` (127.0.0.1 and ::1). Nothing else unlocks an address: a
  seed's host name is not resolved for the policy, so a name that resolves to 10.0.0.5 is
  refused like any link to it, and a 10.0.0.5 seed admits 10.0.0.5, not the rest of
  10/8 nor fd00:ec2::254.
* ``GuardedBackend`` is the httpcore network backend the fetcher's connection pool connects
  through: each new connection resolves its host once (the ``resolver`` hook, default
  ``socket.getaddrinfo``), checks every address against the current policy, and connects to
  an allowed address itself (the ``connector`` hook, default httpcore's ``SyncBackend``),
  so the address checked is the address connected to: a name that resolves to a public
  address for one request and to a private one for the next (DNS rebinding) is checked each
  time it is resolved. The request keeps its host name: the Host header and the TLS server
  name (SNI) are the URL's, only the socket goes to the checked IP. When no address of the
  host is allowed, ``connect_tcp`` raises ``AddressRefused`` and nothing is sent anywhere.
"""

from __future__ import annotations

import ipaddress
import socket
import time
from typing import Callable, Iterable

import httpcore

__all__ = ["ADDRESS_KINDS", "ADDRESS_REFUSED", "METADATA_ENDPOINTS", "AddressPolicy", "AddressRefused", "GuardedBackend",
           "address_kind", "system_resolver", "system_connector", "Resolver", "Connector"]

ADDRESS_REFUSED = "address refused"  # the recorded error of a URL whose host is refused

# The IANA IPv4 and IPv6 Special-Purpose Address Registries
# (https://www.iana.org/assignments/iana-ipv4-special-registry/,
#  https://www.iana.org/assignments/iana-ipv6-special-registry/, as of 2025), plus the
# multicast blocks and the IPv6 space outside 2000::/3 (IANA IPv6 Address Space: not
# allocated for global unicast). Prefix -> None when the registry says "Globally Reachable:
# True", else the kind a crawl names when it refuses it. The most specific prefix decides
# (2001:1::1/128 is globally reachable inside the non-global 2001::/23). Written out here, not
# taken from ``ipaddress.is_global``, whose tables depend on the Python patch release.
_SPECIAL: dict[str, str | None] = {
    # IPv4
    "0.0.0.0/8": "reserved",                 # "this network" (RFC 791)
    "0.0.0.0/32": "unspecified",             # "this host on this network"
    "10.0.0.0/8": "private",                 # RFC 1918
    "100.64.0.0/10": "shared",               # carrier-grade NAT (RFC 6598)
    "127.0.0.0/8": "loopback",
    "169.254.0.0/16": "link-local",
    "172.16.0.0/12": "private",
    "192.0.0.0/24": "reserved",              # IETF protocol assignments (RFC 6890)
    "192.0.0.0/29": "reserved",              # IPv4 service continuity prefix (RFC 7335)
    "192.0.0.8/32": "reserved",              # IPv4 dummy address (RFC 7600)
    "192.0.0.9/32": None,                    # Port Control Protocol anycast (RFC 7723)
    "192.0.0.10/32": None,                   # TURN anycast (RFC 8155)
    "192.0.0.170/31": "reserved",            # NAT64/DNS64 discovery (RFC 7050)
    "192.0.2.0/24": "documentation",         # TEST-NET-1
    "192.31.196.0/24": None,                 # AS112-v4 (RFC 7535)
    "192.52.193.0/24": None,                 # AMT (RFC 7450)
    "192.88.99.0/24": "reserved",            # deprecated 6to4 relay anycast (RFC 7526)
    "192.168.0.0/16": "private",
    "192.175.48.0/24": None,                 # direct delegation AS112 service (RFC 7534)
    "198.18.0.0/15": "reserved",             # benchmarking (RFC 2544)
    "198.51.100.0/24": "documentation",      # TEST-NET-2
    "203.0.113.0/24": "documentation",       # TEST-NET-3
    "224.0.0.0/4": "multicast",              # (the IPv4 multicast registry)
    "240.0.0.0/4": "reserved",               # reserved for future use (RFC 1112)
    "255.255.255.255/32": "reserved",        # limited broadcast
    # IPv6
    "::/3": "reserved",                      # outside 2000::/3: not global unicast space
    "4000::/2": "reserved",
    "8000::/1": "reserved",
    "::/128": "unspecified",
    "::1/128": "loopback",
    "64:ff9b:1::/48": "reserved",            # local-use IPv4/IPv6 translation (RFC 8215)
    "100::/64": "reserved",                  # discard-only (RFC 6666)
    "100:0:0:1::/64": "reserved",            # dummy IPv6 prefix (RFC 9780)
    "2001::/23": "reserved",                 # IETF protocol assignments (RFC 2928)
    "2001:1::1/128": None,                   # Port Control Protocol anycast (RFC 7723)
    "2001:1::2/128": None,                   # TURN anycast (RFC 8155)
    "2001:1::3/128": None,                   # DNS-SD service registration protocol anycast (RFC 9665)
    "2001:2::/48": "reserved",               # benchmarking (RFC 5180)
    "2001:3::/32": None,                     # AMT (RFC 7450)
    "2001:4:112::/48": None,                 # AS112-v6 (RFC 7535)
    "2001:10::/28": "reserved",              # deprecated ORCHID (RFC 4843)
    "2001:20::/28": None,                    # ORCHIDv2 (RFC 7343)
    "2001:30::/28": None,                    # drone remote ID DETs (RFC 9374)
    "2001:db8::/32": "documentation",        # RFC 3849
    "2620:4f:8000::/48": None,               # direct delegation AS112 service (RFC 7534)
    "3fff::/20": "documentation",            # RFC 9637
    "5f00::/16": "reserved",                 # segment routing SIDs (RFC 9602)
    "fc00::/7": "private",                   # unique local (RFC 4193)
    "fe80::/10": "link-local",
    "fec0::/10": "reserved",                 # deprecated site-local (RFC 3879)
    "ff00::/8": "multicast",
}
# (prefix length, network, kind), most specific first
_TABLE = sorted(((net.prefixlen, net, kind) for net, kind in
                 ((ipaddress.ip_network(n), k) for n, k in _SPECIAL.items())), key=lambda e: -e[0])
ADDRESS_KINDS = ("unspecified", "loopback", "link-local", "multicast", "private", "shared", "documentation",
                 "reserved", "metadata")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")          # well-known prefix (RFC 6052): globally reachable
_COMPATIBLE = ipaddress.ip_network("::/96")             # deprecated IPv4-compatible (RFC 4291)
_TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")   # IPv4-translated (RFC 2765)

# resolver(host, port) -> IP address strings in the order to try them (raises OSError)
Resolver = Callable[[str, int], "list[str]"]
# connector(ip, port, timeout, local_address, socket_options) -> an httpcore network stream
Connector = Callable[..., httpcore.NetworkStream]


def _carried_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 form carries (IPv4-mapped ``::ffff:0:0/96``, IPv4-compatible
    ``::/96``, IPv4-translated ``::ffff:0:0:0/96``, NAT64 ``64:ff9b::/96``, 6to4, Teredo), or
    None. ``::`` and ``::1`` are themselves, not IPv4 carriers."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip in _COMPATIBLE or ip in _TRANSLATED or ip in _NAT64:
        return None if int(ip) <= 1 else ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return ip.sixtofour or (ip.teredo[1] if ip.teredo else None)


def _registry_kind(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    for _, net, kind in _TABLE:
        if ip.version == net.version and ip in net:
            return kind
    return None


def address_kind(address: str) -> str | None:
    """None for a globally reachable address, else its non-global kind (``_SPECIAL``);
    "reserved" too for a string that is not an IP address at all (refused: it cannot be
    checked). An IPv6 form that carries an IPv4 address is judged by the address it carries
    (IPv4-mapped always; the others when the IPv4 address is not global, else by their own
    prefix: 6to4 and Teredo go through relays)."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])  # an IPv6 zone id (fe80::1%eth0)
    except ValueError:
        return "reserved"
    if ip.version == 6:
        carried = _carried_ipv4(ip)
        if carried is not None:
            kind = _registry_kind(carried)
            if kind is not None or ip.ipv4_mapped or ip in _COMPATIBLE or ip in _TRANSLATED or ip in _NAT64:
                return kind
    return _registry_kind(ip)


def system_resolver(host: str, port: int) -> list[str]:
    """The host's addresses by ``socket.getaddrinfo`` (an IP literal is returned as is)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


_SYSTEM_BACKEND = httpcore.SyncBackend()


def system_connector(address: str, port: int, timeout: float | None = None, local_address: str | None = None,
                     socket_options: Iterable | None = None) -> httpcore.NetworkStream:
    """A TCP connection to the IP ``address`` by httpcore's own backend."""
    return _SYSTEM_BACKEND.connect_tcp(address, port, timeout=timeout, local_address=local_address,
                                       socket_options=socket_options)


# Cloud metadata and host services, refused unless --allow-private-addresses whatever the
# seeds are (a crawl seeded on one must not read instance credentials); compared by the IPv4
# address an IPv6 form carries too. Azure's 168.63.129.16 is a global address.
METADATA_ENDPOINTS = frozenset(ipaddress.ip_address(a) for a in (
    "169.254.169.254",   # AWS, GCP, Azure, OpenStack, DigitalOcean, Oracle, ... instance metadata
    "169.254.170.2",     # AWS ECS task metadata and credentials
    "169.254.170.23",    # AWS EKS Pod Identity agent
    "fd00:ec2::254",     # AWS instance metadata over IPv6
    "fd00:ec2::23",      # AWS EKS Pod Identity agent over IPv6
    "100.100.100.200",   # Alibaba Cloud metadata
    "169.254.0.23",      # Tencent Cloud metadata
    "192.0.0.192",       # Oracle Cloud (legacy) metadata
    "168.63.129.16",     # Azure WireServer (host agent)
))
METADATA = "metadata"  # the refused kind of a METADATA_ENDPOINTS address

# The names that are the local machine whatever DNS says (RFC 6761): a seed on one of them
# admits these addresses.
_LOCALHOST = {"localhost": ("127.0.0.1", "::1")}


def _ip(address: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address (the IPv4 one it carries for IPv4-mapped/compatible/translated/NAT64
    forms), or None for a string that is not an IP address."""
    try:
        ip = ipaddress.ip_address(address.strip("[]").split("%", 1)[0])
    except ValueError:
        return None
    carried = _carried_ipv4(ip) if ip.version == 6 else None
    return carried if carried is not None else ip


def _exact(address: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address itself (an IPv4-mapped one as its IPv4 address: the same socket), or None."""
    try:
        ip = ipaddress.ip_address(address.strip("[]").split("%", 1)[0])
    except ValueError:
        return None
    return (ip.ipv4_mapped or ip) if ip.version == 6 else ip


class AddressRefused(Exception):
    """No address of ``host`` may be connected to; ``str()`` is the recorded error."""

    def __init__(self, host: str, address: str, kind: str) -> None:
        self.host, self.address, self.kind = host, address, kind
        where = address if host == address else f"{host} ({address})"
        what = "a cloud metadata endpoint" if kind == METADATA else f"a {kind} address"
        super().__init__(f"{ADDRESS_REFUSED}: {where} is {what}; "
                         "crawl with --allow-private-addresses to fetch it")


class AddressPolicy:
    """What a crawl may connect to: global addresses (but the cloud metadata endpoints), the
    non-global ``kinds`` named, and the exact ``addresses`` listed (any port)."""

    def __init__(self, allowed: Iterable[str] = (), addresses: Iterable[str] = ()) -> None:
        self.allowed = frozenset(allowed)
        unknown = self.allowed - set(ADDRESS_KINDS)
        if unknown:
            raise ValueError(f"unknown address kinds {sorted(unknown)}")
        self.addresses = frozenset(ip for ip in map(_exact, addresses) if ip is not None)

    @classmethod
    def everything(cls) -> "AddressPolicy":
        return cls(ADDRESS_KINDS)

    @classmethod
    def for_seeds(cls, hosts: Iterable[str], *, allow_private: bool = False) -> "AddressPolicy":
        """The crawl's policy: everything with ``allow_private``; else global addresses and
        the seeds' own addresses: the seed hosts that are IP literals, and the loopback
        addresses of ``localhost``. A host name is never resolved here: what a name resolves
        to unlocks nothing (its non-global addresses stay refused). Metadata endpoints stay
        refused even when seeded."""
        if allow_private:
            return cls.everything()
        addresses: list[str] = []
        for host in hosts:
            name = host.strip("[]").lower().rstrip(".")
            addresses += _LOCALHOST.get(name, (name,) if _ip(name) is not None else ())
        return cls((), addresses)

    def refusal(self, address: str) -> str | None:
        """None if ``address`` may be connected to, else its refused kind (``"metadata"`` for
        a cloud metadata endpoint)."""
        ip = _ip(address)
        if ip in METADATA_ENDPOINTS:
            return None if METADATA in self.allowed else METADATA
        kind = address_kind(address)
        if kind is None or kind in self.allowed or _exact(address) in self.addresses:
            return None
        return kind

    def describe(self) -> str:
        if self.allowed == set(ADDRESS_KINDS):
            return "every address"
        parts = [k for k in ADDRESS_KINDS if k in self.allowed and k != METADATA]
        if self.addresses:
            parts.append("the seeds' own " + ", ".join(sorted(map(str, self.addresses))))
        if not parts:
            return "global addresses only"
        return "global addresses and " + " and ".join(parts)


class GuardedBackend(httpcore.NetworkBackend):
    """An httpcore network backend that connects only to addresses ``policy`` allows.

    ``policy`` may be replaced at any time (a crawl settles it once its seeds are known);
    connections made before stay as they are."""

    def __init__(self, policy: AddressPolicy | None = None, *, resolver: Resolver | None = None,
                 connector: Connector | None = None) -> None:
        self.policy = policy if policy is not None else AddressPolicy()
        self.resolver = resolver or system_resolver
        self.connector = connector or system_connector

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: Iterable | None = None) -> httpcore.NetworkStream:
        try:
            addresses = self.resolver(host, port)
        except (OSError, UnicodeError) as exc:
            raise httpcore.ConnectError(f"cannot resolve {host}: {exc}") from exc
        if not addresses:
            raise httpcore.ConnectError(f"cannot resolve {host}: no address")
        policy = self.policy
        allowed = [a for a in addresses if policy.refusal(a) is None]
        if not allowed:
            raise AddressRefused(host, addresses[0], policy.refusal(addresses[0]) or "reserved")
        error: Exception | None = None
        for address in allowed:  # as socket.create_connection does: the next on failure
            try:
                return self.connector(address, port, timeout, local_address, socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                error = exc
        assert error is not None
        raise error

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Iterable | None = None) -> httpcore.NetworkStream:
        raise httpcore.ConnectError("a crawl connects over TCP only")

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)
