"""A TCP listener on 127.0.0.1 that is no Dask scheduler, for the cluster tests: it accepts
every connection and sends ``answer`` (None: nothing, a silent listener)."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator


@contextlib.contextmanager
def listener(answer: bytes | None) -> Iterator[str]:
    """Its address, ``tcp://127.0.0.1:PORT``, while it runs."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    held: list[socket.socket] = []

    def serve() -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = server.accept()
                held.append(conn)
                if answer is not None:
                    conn.sendall(answer)

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield f"tcp://127.0.0.1:{server.getsockname()[1]}"
    finally:
        server.close()
        for conn in held:
            conn.close()
