"""Which IP addresses a crawl may connect to, enforced where the connection is made.

Layer: crawler (imports the standard library and ``httpcore``; no HBase).

A page, a redirect or a robots.txt ``Sitemap:`` line can name any host; without a rule the
crawler would fetch (and index) a cloud metadata service (``169.254.169.254``), the
machine's own services (``127.0.0.1:9095``) or an intranet (``10.0.0.5``). This module is
that rule:

* ``address_kind(ip)`` classifies an address: None for a globally routable one, else the
  name of its non-global kind (``ADDRESS_KINDS``): loopback, private (RFC 1918, RFC 4193),
  link-local (169.254/16, fe80::/10), shared (carrier-grade NAT, 100.64/10), multicast,
  unspecified, documentation, and reserved (every other range ``ipaddress`` does not call
  global). IPv6 forms that carry an IPv4 address (IPv4-mapped ``::ffff:a.b.c.d``, 6to4,
  Teredo, NAT64 ``64:ff9b::/96``) are classified by the address they carry.
* ``AddressPolicy`` says which kinds a crawl may connect to: none by default; all with
  ``--allow-private-addresses``; and when every seed that resolves is on a non-global
  address, the kinds of the seeds' own addresses (a crawl of ``127.0.0.1`` may fetch
  loopback pages, not ``10.0.0.5`` nor ``169.254.169.254``; an intranet crawl seeded on
  ``10.x`` may fetch private addresses, not loopback).
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

__all__ = ["ADDRESS_KINDS", "ADDRESS_REFUSED", "AddressPolicy", "AddressRefused", "GuardedBackend",
           "address_kind", "system_resolver", "system_connector", "Resolver", "Connector"]

ADDRESS_REFUSED = "address refused"  # the recorded error of a URL whose host is refused

# kind -> the ranges it names (checked in this order; "reserved" is every other non-global one)
_RANGES = {
    "unspecified": ("0.0.0.0/32", "::/128"),
    "loopback": ("127.0.0.0/8", "::1/128"),
    "link-local": ("169.254.0.0/16", "fe80::/10"),
    "multicast": ("224.0.0.0/4", "ff00::/8"),
    "private": ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7"),
    "shared": ("100.64.0.0/10",),
    "documentation": ("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24", "2001:db8::/32"),
}
_NETWORKS = {kind: tuple(ipaddress.ip_network(n) for n in nets) for kind, nets in _RANGES.items()}
ADDRESS_KINDS = tuple(_RANGES) + ("reserved",)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")

# resolver(host, port) -> IP address strings in the order to try them (raises OSError)
Resolver = Callable[[str, int], "list[str]"]
# connector(ip, port, timeout, local_address, socket_options) -> an httpcore network stream
Connector = Callable[..., httpcore.NetworkStream]


def address_kind(address: str) -> str | None:
    """None for a globally routable address, else its non-global kind; "reserved" too for
    a string that is not an IP address at all (refused: it cannot be checked)."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])  # an IPv6 zone id (fe80::1%eth0)
    except ValueError:
        return "reserved"
    if ip.version == 6:
        carried = ip.ipv4_mapped or ip.sixtofour or (ip.teredo[1] if ip.teredo else None)
        if carried is None and ip in _NAT64:
            carried = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if carried is not None:
            kind = address_kind(str(carried))
            if kind is not None or ip.ipv4_mapped:
                return kind
    for kind, networks in _NETWORKS.items():
        if any(ip in net for net in networks):
            return kind
    return None if ip.is_global else "reserved"


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


class AddressRefused(Exception):
    """No address of ``host`` may be connected to; ``str()`` is the recorded error."""

    def __init__(self, host: str, address: str, kind: str) -> None:
        self.host, self.address, self.kind = host, address, kind
        where = address if host == address else f"{host} ({address})"
        super().__init__(f"{ADDRESS_REFUSED}: {where} is a {kind} address; "
                         "crawl with --allow-private-addresses to fetch it")


class AddressPolicy:
    """The non-global kinds a crawl may connect to (global addresses always may)."""

    def __init__(self, allowed: Iterable[str] = ()) -> None:
        self.allowed = frozenset(allowed)
        unknown = self.allowed - set(ADDRESS_KINDS)
        if unknown:
            raise ValueError(f"unknown address kinds {sorted(unknown)}")

    @classmethod
    def everything(cls) -> "AddressPolicy":
        return cls(ADDRESS_KINDS)

    @classmethod
    def for_seeds(cls, hosts: Iterable[tuple[str, int]], resolver: Resolver, *,
                  allow_private: bool = False) -> "AddressPolicy":
        """The crawl's policy: everything with ``allow_private``; else the kinds of the
        seeds' addresses when every seed host that resolves is on non-global addresses only
        (hosts that do not resolve are not counted); else no non-global kind."""
        if allow_private:
            return cls.everything()
        kinds: set[str] = set()
        for host, port in hosts:
            try:
                addresses = resolver(host, port)
            except (OSError, UnicodeError):
                continue
            found = [address_kind(a) for a in addresses]
            if any(k is None for k in found):
                return cls()
            kinds.update(found)
        return cls(kinds)

    def refusal(self, address: str) -> str | None:
        """None if ``address`` may be connected to, else its (refused) kind."""
        kind = address_kind(address)
        return None if kind is None or kind in self.allowed else kind

    def describe(self) -> str:
        if not self.allowed:
            return "global addresses only"
        if self.allowed == set(ADDRESS_KINDS):
            return "every address"
        return "global and " + ", ".join(k for k in ADDRESS_KINDS if k in self.allowed) + " addresses"


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
