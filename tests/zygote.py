"""A Python that has imported torch already, to start the tests' Python subprocesses from.

Every `codegen build` a test runs, and every script that imports torch and a test library,
started a fresh interpreter that imported torch again: about 2 s of CPU each (torch's Python
modules, not its shared libraries), some thirty times a run; and the other `codegen` commands,
a hundred-odd, each started Python and the toolchain's imports.
A zygote (as Android's, and as multiprocessing's forkserver) imports torch and the toolchain
(PRELOADED) once; each command is a fork of it, which shares those pages and imports nothing
again.

`Zygote.run(args, ...)` takes what `subprocess.run([sys.executable, *args], ...)` takes for
the two forms tests use, `-c CODE [ARG...]` and `-m MODULE [ARG...]`, and returns its
CompletedProcess: the exit status (a signal's negative number, as subprocess gives),
stdout and stderr.  The child gets its own working directory, environment, sys.argv and
sys.path (PYTHONPATH of the environment given, then the zygote's own); what it does not get
is a fresh interpreter: torch and what torch imports are imported already.  So a command
whose environment differs from the zygote's in a variable that torch or the C and C++
runtimes read when they load (TORCH*, ATEN_CPU_CAPABILITY, LD_PRELOAD, OMP_*, ...: ENV_AT_LOAD)
runs as a plain subprocess instead, as does every command while OPWRAP_TEST_ZYGOTE=0.
A test that is about a fresh interpreter (what an import prints, what loading one module
alone does) uses subprocess itself.

The zygote serves one command at a time over a Unix socket, passing the pipes of the
command's standard streams as file descriptors; it waits for the command (os.wait4) and
sends back its exit status and CPU seconds, which conftest.py's CPU report counts for the
test that ran it.  It runs this file as a script; it exits when the process that started it
is gone."""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

# Variables read when torch, its libraries or the C runtime load, whose value the zygote's
# imports have already used.
ENV_AT_LOAD = ("TORCH", "PYTORCH", "ATEN", "CUDA", "NCCL", "TRITON", "OMP_", "MKL", "KMP_", "GOMP", "LD_",
               "MALLOC", "ASAN", "UBSAN", "PYTHON")
# Of those, the ones a command may set: the child applies them itself (PYTHONUNBUFFERED
# changes nothing here: its output is read when it ends).
OWN_ENV = ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED")
SWITCH = "OPWRAP_TEST_ZYGOTE"  # 0: every command a plain subprocess


def _at_load(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith(ENV_AT_LOAD) and k not in OWN_ENV}


def _send(sock: socket.socket, payload: bytes) -> None:
    sock.sendall(struct.pack("!Q", len(payload)) + payload)


def _receive(sock: socket.socket) -> bytes:
    def exactly(n: int) -> bytes:
        chunks = []
        while n:
            chunk = sock.recv(n)
            if not chunk:
                raise ConnectionError("the zygote closed the connection")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)
    (length,) = struct.unpack("!Q", exactly(8))
    return exactly(length)


class Zygote:
    """The zygote of this process, started on first use (`get`)."""

    _this: Zygote | None = None
    cpu_seconds = 0.0  # of the commands it ran for this process: conftest.py's CPU report

    def __init__(self) -> None:
        # a Unix socket's path holds at most 107 bytes: under a long TMPDIR, /tmp
        base = tempfile.gettempdir() if len(tempfile.gettempdir()) <= 64 else "/tmp"
        self.dir = Path(tempfile.mkdtemp(prefix="opwrap-zygote-", dir=base))
        self.path = self.dir / "socket"
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        self.env_at_load = _at_load(env)
        self.process = subprocess.Popen([sys.executable, __file__, str(self.path), str(os.getpid())],
                                        stdin=subprocess.DEVNULL, env=env, cwd=self.dir)

    @classmethod
    def get(cls) -> Zygote:
        if cls._this is None or cls._this.process.poll() is not None:
            cls._this = cls()
            import atexit
            atexit.register(cls._this.close)
        return cls._this

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()  # its CPU seconds then count among this process's children's
        for leftover in self.dir.iterdir():
            leftover.unlink()
        self.dir.rmdir()

    def _connect(self) -> socket.socket:
        import time
        deadline = time.monotonic() + 120  # its import of torch
        while True:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.connect(str(self.path))
                return sock
            except (FileNotFoundError, ConnectionRefusedError):
                sock.close()
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the test zygote did not start (exit status {self.process.poll()})") from None
                time.sleep(0.05)

    def run(self, args: list[str], *, cwd: str | Path | None = None, env: dict[str, str] | None = None,
            input: str | None = None, timeout: float | None = None) -> subprocess.CompletedProcess:
        """`subprocess.run([sys.executable, *args], cwd=cwd, env=env, input=input,
        capture_output=True, text=True, timeout=timeout)`, forked from the zygote where it
        can be (see the module's docstring)."""
        args = [str(a) for a in args]
        env = dict(os.environ if env is None else env)
        if (os.environ.get(SWITCH) == "0" or args[:1] not in (["-c"], ["-m"]) or len(args) < 2
                or _at_load(env) != self.env_at_load):
            return subprocess.run([sys.executable, *args], cwd=cwd, env=env, input=input, capture_output=True,
                                  text=True, timeout=timeout)
        pipes = [os.pipe() for _ in range(3)]  # stdin, stdout, stderr
        sock = self._connect()
        with sock:
            request = {"args": args, "cwd": str(cwd or os.getcwd()), "env": env}
            socket.send_fds(sock, [b"."], [pipes[0][0], pipes[1][1], pipes[2][1]])
            for end in (pipes[0][0], pipes[1][1], pipes[2][1]):
                os.close(end)
            _send(sock, json.dumps(request).encode())
            out: dict[int, bytes] = {}

            def drain(index: int) -> None:
                with os.fdopen(pipes[index][0], "rb") as f:
                    out[index] = f.read()

            readers = [threading.Thread(target=drain, args=(i,), daemon=True) for i in (1, 2)]
            for reader in readers:
                reader.start()
            with os.fdopen(pipes[0][1], "wb") as stdin:
                if input:
                    try:
                        stdin.write(input.encode())
                    except BrokenPipeError:
                        pass
            pid = int(_receive(sock))
            sock.settimeout(timeout)
            try:
                status = json.loads(_receive(sock))
            except TimeoutError:
                os.kill(pid, signal.SIGKILL)
                sock.settimeout(None)
                _receive(sock)  # its status, once the zygote has waited for it
                for reader in readers:
                    reader.join()
                raise subprocess.TimeoutExpired([sys.executable, *args], timeout or 0,
                                                out.get(1, b"").decode(errors="replace"),
                                                out.get(2, b"").decode(errors="replace")) from None
            for reader in readers:
                reader.join()
        Zygote.cpu_seconds += status["cpu"]
        return subprocess.CompletedProcess([sys.executable, *args], status["returncode"],
                                           out[1].decode(errors="replace"), out[2].decode(errors="replace"))


# ------------------------------------------------------------------ the zygote itself

def _child(args: list[str], cwd: str, env: dict[str, str], base_path: list[str]) -> None:
    """In the forked child: become `python *args` in `cwd` with `env`, run it, and exit with
    its status as the interpreter would (threads joined, atexit functions run)."""
    import atexit
    import runpy
    import traceback
    import types
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    extra = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.dont_write_bytecode = bool(env.get("PYTHONDONTWRITEBYTECODE"))
    mode, target, rest = args[0], args[1], args[2:]
    code = 0
    try:
        if mode == "-c":
            sys.argv = ["-c", *rest]
            sys.path[:] = ["", *extra, *base_path]
            main = types.ModuleType("__main__")
            main.__dict__["__builtins__"] = __builtins__
            sys.modules["__main__"] = main
            exec(compile(target, "<string>", "exec"), main.__dict__)
        else:
            sys.argv = [target, *rest]  # runpy puts the module's file first, as -m does
            sys.path[:] = [cwd, *extra, *base_path]
            runpy.run_module(target, run_name="__main__", alter_sys=True)
    except SystemExit as e:
        if e.code is None:
            code = 0
        elif isinstance(e.code, int):
            code = e.code
        else:
            print(e.code, file=sys.stderr)
            code = 1
    except BaseException as e:  # what the interpreter prints for an uncaught exception, from the command's frames
        traceback.print_exception(type(e), e, e.__traceback__.tb_next if e.__traceback__ else None)
        code = 1
    try:
        threading._shutdown()  # type: ignore[attr-defined]  # what interpreter exit does first
        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
    finally:
        os._exit(code & 0xFF)


# The toolchain's modules that every `codegen` command imports (the CLI, the pipeline and its
# plugins), imported by the zygote too: the editable install's sources have no bytecode where
# none is written (PYTHONDONTWRITEBYTECODE, as on this project's machines), so each command
# compiled them again, 0.24 s of its 0.34 s of CPU for a `codegen generate` of a `codegen
# init` library (0.10 s with them imported).  None of them reads the environment or the
# working directory when imported.  Not opwrap_codegen.cli itself: `-m` runs a fresh copy
# as __main__ (and runpy warns of the one imported).  Not torch.utils.cpp_extension:
# `codegen build` imports it after setting CUDA_HOME, which it reads once, when imported.
PRELOADED = ("click", "opwrap_codegen.scaffold", "opwrap_codegen.build")
PRELOADED_PACKAGES = ("opwrap_codegen.api", "opwrap_codegen.core", "opwrap_codegen.front", "opwrap_codegen.lang",
                      "opwrap_codegen.pipeline", "opwrap_codegen.plugins")


def _preload() -> None:
    import importlib
    import pkgutil

    for name in PRELOADED:
        importlib.import_module(name)
    for package in PRELOADED_PACKAGES:
        for module in pkgutil.walk_packages(importlib.import_module(package).__path__, package + "."):
            importlib.import_module(module.name)


def _serve(path: str, parent: int) -> None:
    import torch  # noqa: F401  # what the children share
    _preload()

    base_path = sys.path[1:]  # without the entry of this script's folder
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen()
    server.settimeout(1.0)
    while True:
        try:
            conn, _ = server.accept()
        except TimeoutError:
            if os.getppid() != parent:  # the test process is gone
                return
            continue
        with conn:
            try:
                _serve_one(conn, base_path, server)
            except (OSError, ValueError):  # the test process went away mid-request
                pass


def _serve_one(conn: socket.socket, base_path: list[str], server: socket.socket) -> None:
    conn.settimeout(None)
    _, fds, _, _ = socket.recv_fds(conn, 1, 3)
    request = json.loads(_receive(conn))
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    pid = os.fork()
    if pid == 0:
        server.close()
        conn.close()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        _child(request["args"], request["cwd"], request["env"], base_path)
    for fd in fds:
        os.close(fd)
    _send(conn, str(pid).encode())
    _, status, usage = os.wait4(pid, 0)
    returncode = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
    try:
        _send(conn, json.dumps({"returncode": returncode,
                                "cpu": usage.ru_utime + usage.ru_stime}).encode())
    except OSError:  # the test process stopped waiting
        pass


if __name__ == "__main__":
    _serve(sys.argv[1], int(sys.argv[2]))
