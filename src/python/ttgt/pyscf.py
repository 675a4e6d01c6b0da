"""PySCF through ttgt: ``ttgt.pyscf.install()`` makes every ``lib.einsum`` and
``lib.contract`` call of PySCF run on ttgt; ``uninstall()`` restores PySCF's own.

PySCF binds ``einsum = lib.einsum`` in many modules at import time, so ``install`` replaces
the function wherever an imported ``pyscf`` module holds it, and in ``pyscf.lib`` and
``pyscf.lib.numpy_helper`` for modules imported later. PySCF's behaviour is kept: arrays
below ``numpy_helper.EINSUM_MAX_SIZE`` elements go to numpy as they do in PySCF, ``out``,
``alpha`` and ``beta`` mean what they mean there, and dtypes ttgt does not compute in go to
numpy. A TBLIS backend that PySCF found is bypassed while ttgt is installed.

>>> import ttgt.pyscf
>>> ttgt.pyscf.install()      # doctest: +SKIP
>>> ttgt.pyscf.uninstall()    # doctest: +SKIP
"""

from __future__ import annotations

import sys
from typing import Any, Callable, List, Optional, Tuple

import numpy as np

from . import _api

_installed: Optional[Tuple[Callable[..., Any], Callable[..., Any]]] = None
_replaced: List[Tuple[Any, str, Any]] = []


def _helper() -> Any:
    try:
        from pyscf.lib import numpy_helper
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("ttgt.pyscf needs PySCF: pip install pyscf") from e
    return numpy_helper


def contract(subscripts: str, A: Any, B: Any, alpha: Any = 1, beta: Any = 0, out: Optional[np.ndarray] = None, **kwargs: Any) -> Any:
    """PySCF's ``lib.contract`` on ttgt: ``alpha * einsum(subscripts, A, B) + beta * out``."""
    nh = _helper()
    a, b = np.asarray(A), np.asarray(B)
    if a.size < nh.EINSUM_MAX_SIZE or b.size < nh.EINSUM_MAX_SIZE:
        return nh._numpy_einsum(subscripts, a, b, alpha=alpha, beta=beta, out=out)
    return _api.einsum(subscripts, a, b, out=out, alpha=alpha, beta=beta, casting="unsafe")


def einsum(subscripts: str, *tensors: Any, **kwargs: Any) -> Any:
    """PySCF's ``lib.einsum`` on ttgt (one to any number of operands; ``out``, ``alpha``,
    ``beta``, ``optimize`` and ``dtype`` as PySCF takes them)."""
    nh = _helper()
    kwargs.pop("_contract", None)
    arrays = [np.asarray(t) for t in tensors]
    if len(arrays) == 2 and min(arrays[0].size, arrays[1].size) < nh.EINSUM_MAX_SIZE:
        return nh._numpy_einsum(subscripts, *arrays, **kwargs)
    out = kwargs.pop("out", None)
    alpha = kwargs.pop("alpha", 1)
    beta = kwargs.pop("beta", 0)
    optimize = kwargs.pop("optimize", True)
    dtype = kwargs.pop("dtype", None)
    if kwargs:
        return nh._numpy_einsum(subscripts, *arrays, out=out, alpha=alpha, beta=beta, optimize=optimize, dtype=dtype, **kwargs)
    return _api.einsum(subscripts, *arrays, out=out, alpha=alpha, beta=beta, optimize=optimize, dtype=dtype, casting="unsafe")


def install() -> None:
    """Routes PySCF's einsum and contract through ttgt (idempotent)."""
    global _installed
    if _installed is not None:
        return
    nh = _helper()
    originals = (nh.einsum, nh.contract)
    ours = {id(originals[0]): einsum, id(originals[1]): contract}
    for name, mod in list(sys.modules.items()):
        if mod is None or not (name == "pyscf" or name.startswith("pyscf.")):
            continue
        for attr, value in list(getattr(mod, "__dict__", {}).items()):
            new = ours.get(id(value))
            if new is not None and (value is originals[0] or value is originals[1]):
                _replaced.append((mod, attr, value))
                setattr(mod, attr, new)
    _installed = originals


def uninstall() -> None:
    """Restores PySCF's own einsum and contract everywhere ``install`` replaced them."""
    global _installed
    for mod, attr, value in reversed(_replaced):
        setattr(mod, attr, value)
    _replaced.clear()
    _installed = None


def installed() -> bool:
    """Whether PySCF's einsum currently runs on ttgt."""
    return _installed is not None
