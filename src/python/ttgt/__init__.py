"""ttgt: tensor contractions by Transpose-Transpose-GEMM-Transpose, for numpy arrays.

numpy's ``einsum``, ``einsum_path``, ``tensordot`` and a materialising ``transpose``, PySCF's
``contract``, and planned einsums (:class:`Plan`), computed by the ttgt engine for float32,
float64, complex64 and complex128, and for float16 and bfloat16 (``ml_dtypes``) with float32
accumulation (every other dtype by numpy). Arrays are read in place,
whatever their strides; the GIL is released while ttgt plans and runs.

>>> import numpy as np, ttgt
>>> a, b = np.random.rand(8, 9, 10, 11), np.random.rand(11, 9, 12, 13)
>>> np.allclose(ttgt.einsum("abcd,dbef->acef", a, b), np.einsum("abcd,dbef->acef", a, b))
True

``ttgt.pyscf.install()`` routes PySCF's einsum through ttgt; ``opt_einsum.contract(...,
backend='ttgt')`` uses this module's ``tensordot``, ``transpose`` and ``einsum``.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

from . import _ttgt
from ._api import contract, einsum, einsum_path, tensordot, transpose
from ._expression import Expression, einsum_expression
from ._plan import Plan, explain
from ._threads import _from_environment, get_num_threads, num_threads, set_num_threads

__version__: str = _ttgt.__version__

__all__ = [
    "Expression",
    "Plan",
    "calibrate",
    "contract",
    "einsum",
    "einsum_expression",
    "einsum_path",
    "explain",
    "get_num_threads",
    "num_threads",
    "release_workspace",
    "set_num_threads",
    "tensordot",
    "transpose",
    "workspace_retention",
]


def calibrate(parts: str = "all", threads: Optional[int] = None, store: bool = True) -> Tuple[Dict[str, Any], Optional[str]]:
    """Measures this machine for ttgt's cost models (copy bandwidth, transposition factors,
    GEMM coefficients; ``parts`` 'all', 'transpose' or 'gemm'), as ``ttgt calibrate`` does,
    and uses the profile from now on. Takes minutes. Returns the profile and the file it
    was stored in (``None`` with ``store=False``)."""
    import json

    text, path = _ttgt.calibrate(parts, threads or 0, 192, 20000.0, store)
    return json.loads(text), path


def release_workspace() -> int:
    """Frees the workspace buffers ttgt keeps for later calls; returns the bytes freed."""
    return int(_ttgt.release_workspace())


def workspace_retention(nbytes: Optional[int] = None) -> int:
    """Bytes of finished workspace buffers (packed operands, GEMM temporaries) ttgt keeps
    for later calls; with ``nbytes``, sets that bound first (0 keeps none; buffers beyond it
    are freed now). The default is 1/8 of physical memory, at most 4 GiB.

    >>> import ttgt
    >>> old = ttgt.workspace_retention()
    >>> ttgt.workspace_retention(1 << 20)
    1048576
    >>> _ = ttgt.workspace_retention(old)
    """
    if nbytes is not None and (isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 0):
        raise ValueError(f"the retention must be a non-negative int of bytes, not {nbytes!r}")
    return int(_ttgt.workspace_retention(nbytes))


_from_environment()
