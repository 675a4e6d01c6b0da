"""Thread control: a process-wide count, a per-thread override, and the default.

The default runs each call on the cores this process may use, divided among the ttgt calls
in flight at that moment, so Python threads that call ttgt at once do not oversubscribe the
machine. ``TTGT_NUM_THREADS`` in the environment sets the process-wide count at import.
"""

from __future__ import annotations

import contextlib
import os
import threading
from typing import Iterator, Optional

from . import _ttgt

class _Local(threading.local):
    """This thread's stack of `num_threads` overrides (empty in every new thread)."""

    stack: tuple = ()


_local = _Local()


def set_num_threads(n: Optional[int]) -> None:
    """Sets the threads of every later call (``None`` or 0: back to the default)."""
    if n is None:
        n = 0
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise ValueError(f"the thread count must be a non-negative int, not {n!r}")
    _ttgt.set_num_threads(n)


def get_num_threads() -> int:
    """Threads a call from this thread runs on when no other call is in flight."""
    local = _local.stack
    if local:
        return local[-1]
    return _ttgt.num_threads_setting() or _ttgt.cpu_count()


@contextlib.contextmanager
def num_threads(n: int) -> Iterator[None]:
    """Runs the calls made from this thread inside the ``with`` block on ``n`` threads.

    >>> import ttgt, numpy as np
    >>> with ttgt.num_threads(1):
    ...     c = ttgt.einsum("ij,jk->ik", np.ones((4, 5)), np.ones((5, 6)))
    """
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"the thread count must be a positive int, not {n!r}")
    outer = _local.stack
    _local.stack = outer + (n,)
    try:
        yield
    finally:
        _local.stack = outer


def _requested() -> int:
    """This thread's override, or 0 for the process-wide setting or the default."""
    stack = _local.stack
    return stack[-1] if stack else 0


def _from_environment() -> None:
    value = os.environ.get("TTGT_NUM_THREADS", "").strip()
    if not value:
        return
    try:
        n = int(value)
    except ValueError:
        raise ValueError(f"TTGT_NUM_THREADS must be a positive integer, not {value!r}") from None
    set_num_threads(n)
