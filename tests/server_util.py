"""Run a llamars-server app under a real uvicorn server on a loopback port, in a thread."""
from __future__ import annotations

import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Optional

import httpx
import pytest
import uvicorn


class LiveServer:
    """`LiveServer(app).start()` serves `app` on 127.0.0.1:<free port>; `url` is its base URL.

    With `ssl_certfile` (and `ssl_keyfile`) it serves HTTPS; other keyword arguments go to
    `uvicorn.Config` unchanged."""

    def __init__(self, app, *, ssl_certfile: Optional[str] = None, ssl_keyfile: Optional[str] = None, **config) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        scheme = "https" if ssl_certfile else "http"
        self.url = f"{scheme}://127.0.0.1:{self.port}"
        if ssl_certfile:
            config.update(ssl_certfile=ssl_certfile, ssl_keyfile=ssl_keyfile)
        config.setdefault("log_level", "warning")
        config.setdefault("lifespan", "on")
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, **config))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def start(self, wait_healthy: bool = True, path: str = "/health") -> "LiveServer":
        self.thread.start()
        t = time.monotonic()
        while not self.server.started:
            if not self.thread.is_alive():
                raise RuntimeError("uvicorn exited before it started")
            if time.monotonic() - t > 30:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        while wait_healthy:
            # a test certificate is self-signed: the health poll does not verify it
            r = httpx.get(self.url + path, timeout=5, verify=False)
            if r.status_code == 200:
                break
            if time.monotonic() - t > 120:
                raise RuntimeError(f"server not healthy: {r.status_code} {r.text}")
            time.sleep(0.05)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)


def wait_healthy(proc, url: str, log_path, limit: float = 120.0) -> None:
    """Wait for a server process at `url` to answer /health with 200 (fails with its log
    if it exits first, or after `limit` seconds)."""
    t0 = time.monotonic()
    while True:
        assert proc.poll() is None, "the server exited:\n" + open(log_path, errors="replace").read()[-4000:]
        try:
            if httpx.get(url + "/health", timeout=5).status_code == 200:
                return
        except httpx.TransportError:
            pass
        assert time.monotonic() - t0 < limit, f"the server did not become healthy within {limit:g} s"
        time.sleep(0.1)


def self_signed_cert(tmp: Path) -> tuple:
    """A self-signed certificate for 127.0.0.1 / localhost: (cert.pem, key.pem) paths in `tmp`."""
    cert, key = tmp / "cert.pem", tmp / "key.pem"
    try:
        import datetime
        import ipaddress

        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID
    except ImportError:
        openssl = shutil.which("openssl")
        if openssl is None:
            pytest.skip("cannot make a test certificate: neither the cryptography package nor the openssl CLI is available")
        subprocess.run(
            [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
             "-days", "1", "-subj", "/CN=127.0.0.1"],
            check=True, capture_output=True, timeout=60,
        )
        return str(cert), str(key)
    k = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    c = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(k.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]), critical=False)
        .sign(k, hashes.SHA256())
    )
    cert.write_bytes(c.public_bytes(serialization.Encoding.PEM))
    key.write_bytes(k.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return str(cert), str(key)
