"""The ops CLI against endpoints that do not behave: one line naming the endpoint and the region,
exit 2, within the CLI's own timeouts (botocore's defaults would wait 60 s per attempt)."""

from __future__ import annotations

import http.server
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

import fanout_kit.ops.aws as aws_module


@contextmanager
def silent_server() -> Iterator[str]:
    """Accepts connections and never answers."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        sock.settimeout(0.1)
        while not stop.is_set():
            try:
                accepted.append(sock.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        stop.set()
        thread.join()
        for conn in accepted:
            conn.close()
        sock.close()


@contextmanager
def web_server() -> Iterator[str]:
    """An ordinary web server: HTML, not an AWS API."""

    class Page(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = b"<html><body>Welcome to nginx!</body></html>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def one_line(run) -> str:
    lines = run.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in run.err, run.err
    return lines[0]


def test_an_endpoint_that_never_answers_is_one_line_after_the_read_timeout(cli, batch_file, monkeypatch):
    monkeypatch.setattr(aws_module, "READ_TIMEOUT_SECONDS", 0.3)
    with silent_server() as endpoint:
        started = time.monotonic()
        run = cli("start", batch_file("n-1"), endpoint=endpoint)
        elapsed = time.monotonic() - started
    line = one_line(run)
    assert run.code == 2
    assert line.startswith(f"fanout: {endpoint} in eu-west-1 did not answer")
    assert "0.3s (3 attempts)" in line
    assert elapsed < 30  # three 0.3 s reads plus standard-mode backoff, not 3 x 60 s


def test_a_server_that_is_not_aws_is_one_line(cli, batch_file):
    with web_server() as endpoint:
        run = cli("start", batch_file("n-2"), endpoint=endpoint)
    assert run.code == 2
    assert one_line(run).startswith(f"fanout: {endpoint} in eu-west-1 answered with something that is not an AWS")


@pytest.mark.parametrize("region", ["eu-west-1", "us-east-2"])
def test_a_name_that_does_not_resolve_names_the_region(cli, batch_file, region):
    run = cli("start", "--region", region, batch_file("n-3"), endpoint="http://no-such-host.invalid")
    assert run.code == 2
    assert one_line(run).startswith(f"fanout: cannot reach http://no-such-host.invalid in {region}: could not connect")


def test_client_config_bounds_every_call():
    config = aws_module.client_config()
    assert config.connect_timeout == aws_module.CONNECT_TIMEOUT_SECONDS
    assert config.read_timeout == aws_module.READ_TIMEOUT_SECONDS
    assert config.retries == {"mode": "standard", "max_attempts": aws_module.MAX_ATTEMPTS}
    client = aws_module.Aws("eu-west-1").client("stepfunctions")
    assert client.meta.config.read_timeout == aws_module.READ_TIMEOUT_SECONDS
