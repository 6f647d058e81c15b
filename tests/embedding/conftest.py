"""One load of the packaged model for the whole session, with the network blocked."""

from __future__ import annotations

import ipaddress
import socket

import pytest

from dbpa.embedding._sentence_transformers import SentenceTransformerEmbedder
from dbpa.specs import EmbedderSpec


def _loopback(host: object) -> bool:
    if host in ("localhost", "", None):
        return True
    try:
        return ipaddress.ip_address(str(host)).is_loopback
    except ValueError:
        return False


@pytest.fixture(scope="session")
def network_attempts() -> list[str]:
    """Hosts that code tried to reach while the session embedder was loaded."""
    return []


@pytest.fixture(scope="session")
def embedder(network_attempts: list[str]) -> SentenceTransformerEmbedder:
    """The default embedder, loaded once, with every non-loopback connection refused."""
    real_connect = socket.socket.connect
    real_getaddrinfo = socket.getaddrinfo

    def guarded_connect(self: socket.socket, address: object) -> object:
        host = address[0] if isinstance(address, tuple) else address
        if not _loopback(host):
            network_attempts.append(str(host))
            raise OSError(f"network blocked in tests: {host}")
        return real_connect(self, address)

    def guarded_getaddrinfo(host: object, *args: object, **kwargs: object) -> object:
        if not _loopback(host):
            network_attempts.append(str(host))
            raise socket.gaierror(f"network blocked in tests: {host}")
        return real_getaddrinfo(host, *args, **kwargs)

    real_create_connection = socket.create_connection

    def guarded_create_connection(address: tuple[str, int], *args: object, **kwargs: object):
        if not _loopback(address[0]):
            network_attempts.append(address[0])
            raise OSError(f"network blocked in tests: {address[0]}")
        return real_create_connection(address, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(socket.socket, "connect", guarded_connect)
        patch.setattr(socket, "getaddrinfo", guarded_getaddrinfo)
        patch.setattr(socket, "create_connection", guarded_create_connection)
        loaded = SentenceTransformerEmbedder(EmbedderSpec())
        loaded.embed(["warm-up text"])
    return loaded
