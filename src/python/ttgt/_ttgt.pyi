from typing import Any, Dict, List, Optional, Tuple

import numpy as np

__version__: str

def einsum_into(
    spec: str,
    operands: List[np.ndarray],
    out: np.ndarray,
    alpha: complex,
    beta: complex,
    dtype: str,
    strategy: Optional[str] = ...,
    path: Optional[List[List[int]]] = ...,
    memory_limit: Optional[int] = ...,
    threads: int = ...,
) -> None: ...
def einsum_new(spec: str, operands: Tuple[Any, ...], threads: int = ...) -> Optional[np.ndarray]: ...
def einsum_path(
    spec: str,
    shapes: List[List[int]],
    strategy: str = ...,
    path: Optional[List[List[int]]] = ...,
    memory_limit: Optional[int] = ...,
) -> Tuple[List[List[int]], str, float, float, float]: ...
def output_shape(spec: str, shapes: List[List[int]]) -> List[int]: ...
def transpose_into(
    a: np.ndarray, axes: List[int], out: np.ndarray, alpha: complex, beta: complex, dtype: str, threads: int = ...
) -> None: ...
def set_num_threads(n: int) -> None: ...
def num_threads_setting() -> int: ...
def cpu_count() -> int: ...
def calibrate(
    parts: str = ..., threads: int = ..., copy_mib: int = ..., gemm_mflop: float = ..., store: bool = ...
) -> Tuple[str, Optional[str]]: ...
def release_workspace() -> int: ...
def workspace_retention(bytes: Optional[int] = ...) -> int: ...

class Plan:
    def __init__(
        self,
        spec: str,
        shapes: List[List[int]],
        strides: List[List[int]],
        out_shape: List[int],
        out_strides: List[int],
        dtype: str,
        strategy: str = ...,
        path: Optional[List[List[int]]] = ...,
        memory_limit: Optional[int] = ...,
        threads: int = ...,
        workspace_limit: Optional[int] = ...,
    ) -> None: ...
    def execute(self, operands: List[np.ndarray], out: np.ndarray, alpha: complex, beta: complex) -> None: ...
    @property
    def spec(self) -> str: ...
    @property
    def threads(self) -> int: ...
    def explain(self) -> str: ...
    def explain_dict(self) -> Dict[str, Any]: ...

class Expression:
    def __init__(
        self,
        spec: str,
        shapes: List[List[int]],
        positions: List[int],
        constants: List[np.ndarray],
        dtype: str,
        strategy: str = ...,
        path: Optional[List[List[int]]] = ...,
        memory_limit: Optional[int] = ...,
        threads: int = ...,
    ) -> None: ...
    def execute(self, operands: List[np.ndarray], out: np.ndarray, alpha: complex, beta: complex) -> None: ...
    def explain(self) -> str: ...
    @property
    def shape(self) -> List[int]: ...
    @property
    def precomputed_steps(self) -> int: ...
