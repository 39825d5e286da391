"""Which addresses only this machine reaches: the servers refuse to listen elsewhere without a token."""

from __future__ import annotations

import ipaddress


def is_loopback(host: str) -> bool:
    """True for an address only this machine reaches (`localhost`, 127.0.0.0/8, ::1).

    A host name other than `localhost` may resolve anywhere, so it counts as exposed.
    """
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
