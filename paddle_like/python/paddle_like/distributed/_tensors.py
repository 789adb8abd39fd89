"""How arrays reach the C++ runtime: numpy arrays through the buffer protocol, any other
object that offers DLPack (a torch CPU tensor, say) through its capsule. Both are zero-copy:
the op reads and writes the caller's memory, and holds it until the op has ended."""
from __future__ import annotations

import sys

import numpy as np

__all__ = ["as_arg", "is_tensor", "numel", "shape_of", "dtype_name", "is_complex"]


def is_tensor(obj) -> bool:
    return isinstance(obj, np.ndarray) or hasattr(obj, "__dlpack__")


def _check(obj, name: str) -> None:
    if not is_tensor(obj):
        raise TypeError(
            f"{name} must be a tensor (a numpy array or an object with __dlpack__), "
            f"got {type(obj).__name__}")


def dtype_name(obj) -> str:
    if isinstance(obj, np.ndarray):
        return obj.dtype.name
    return str(getattr(obj, "dtype", "")).replace("torch.", "")


def as_arg(obj, name: str = "tensor"):
    """What paddle_like._C takes for `obj`: the array itself, or (capsule, dtype name)."""
    _check(obj, name)
    if isinstance(obj, np.ndarray):
        return obj
    name = dtype_name(obj)
    torch = sys.modules.get("torch")
    if name == "bool" and torch is not None and isinstance(obj, torch.Tensor):
        # torch 1.13 exports no bool over DLPack: its bytes as uint8, named bool here.
        return (obj.view(torch.uint8).__dlpack__(), name)
    return (obj.__dlpack__(), name)


def as_args(objs, name: str):
    if not isinstance(objs, (list, tuple)):
        raise TypeError(f"{name} must be a list of tensors, got {type(objs).__name__}")
    return [as_arg(o, name) for o in objs]


def shape_of(obj):
    return tuple(int(d) for d in obj.shape)


def numel(obj) -> int:
    n = 1
    for d in shape_of(obj):
        n *= d
    return n


def is_complex(obj) -> bool:
    if isinstance(obj, np.ndarray):
        return obj.dtype.kind == "c"
    return "complex" in dtype_name(obj)


def empty_like_flat(obj, count: int) -> np.ndarray:
    """A numpy staging buffer of `count` copies of obj's elements (same dtype)."""
    name = dtype_name(obj)
    if name == "bfloat16":
        raise TypeError("bfloat16 tensors cannot be staged through numpy; "
                        "use the *_into_tensor / _single forms for bfloat16")
    return np.empty((count,) + shape_of(obj), dtype=np.dtype(name))
