"""Directory locks, so that two codegen processes in one tree do not interleave their writes.

`torch.utils.cpp_extension` serializes builds of one build directory with a FileBaton (a
lock file created with O_EXCL and polled); a process killed while holding it leaves the file
behind, and every later build then waits forever.  An flock(2) on the directory itself is
released by the kernel when its holder exits however it exits, and leaves no file in the
tree.  (POSIX only; where fcntl does not exist the lock is a no-op.)
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]


@contextmanager
def locked(directory: Path, log: Callable[[str], None] = lambda m: None, *, shared: bool = False,
           create: bool = True) -> Iterator[None]:
    """Hold an exclusive (or `shared`) lock on `directory` (created when `create`) for the
    duration of the block, waiting for other holders and saying so through `log`."""
    if fcntl is None or not (directory.is_dir() or create):
        yield
        return
    directory.mkdir(parents=True, exist_ok=True)
    fd = os.open(directory, os.O_RDONLY)
    try:
        mode = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"codegen: waiting for another codegen process using {directory}")
            fcntl.flock(fd, mode)
        yield
    finally:
        os.close(fd)  # releases the lock
