"""Refuse every connection and name lookup that is not loopback, recording the attempts."""

from __future__ import annotations

import ipaddress
import socket
from typing import Any

import pytest

PROXY_AND_HUB_VARIABLES = (
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "HF_ENDPOINT",
    "HF_HUB_OFFLINE",
    "TRANSFORMERS_OFFLINE",
)


def is_loopback(host: object) -> bool:
    """True for localhost and loopback addresses (and unix sockets)."""
    if host in ("localhost", "", None):
        return True
    try:
        return ipaddress.ip_address(str(host)).is_loopback
    except ValueError:
        return False


def loopback_only(patch: pytest.MonkeyPatch) -> list[str]:
    """Patch ``socket`` so only loopback works; returns the list of refused hosts.

    Proxy and hub variables are removed too, so nothing is told that it may go offline
    gracefully: code that would reach the network fails instead.
    """
    attempts: list[str] = []
    for name in PROXY_AND_HUB_VARIABLES:
        patch.delenv(name, raising=False)
    real_connect = socket.socket.connect
    real_getaddrinfo = socket.getaddrinfo
    real_create_connection = socket.create_connection

    def refuse(host: object) -> None:
        attempts.append(str(host))
        raise OSError(f"network blocked in tests: {host}")

    def connect(self: socket.socket, address: Any) -> Any:
        host = address[0] if isinstance(address, tuple) else None
        if not is_loopback(host):
            refuse(host)
        return real_connect(self, address)

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if not is_loopback(host):
            attempts.append(str(host))
            raise socket.gaierror(f"network blocked in tests: {host}")
        return real_getaddrinfo(host, *args, **kwargs)

    def create_connection(address: tuple[str, int], *args: Any, **kwargs: Any) -> Any:
        if not is_loopback(address[0]):
            refuse(address[0])
        return real_create_connection(address, *args, **kwargs)

    patch.setattr(socket.socket, "connect", connect)
    patch.setattr(socket, "getaddrinfo", getaddrinfo)
    patch.setattr(socket, "create_connection", create_connection)
    return attempts
