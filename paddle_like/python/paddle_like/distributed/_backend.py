"""Backends, their configuration, reduce ops and the option classes (the seed's)."""
from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from .. import _C

__all__ = [
    "Backend", "BackendConfig", "GroupMember", "ReduceOp", "supports_complex",
    "AllreduceOptions", "AllreduceCoalescedOptions", "AllToAllOptions", "BarrierOptions",
    "BroadcastOptions", "GatherOptions", "AllgatherOptions", "ReduceOptions",
    "ReduceScatterOptions", "ScatterOptions", "default_pg_timeout",
]

default_pg_timeout = _dt.timedelta(minutes=30)


class Backend(str):
    """Named communication backends and the devices each serves."""

    UNDEFINED = "undefined"
    NCCL = "nccl"
    GLOO = "gloo"
    MPI = "mpi"

    BACKENDS = [GLOO, MPI, NCCL]
    backend_list = [UNDEFINED, GLOO, NCCL, MPI]
    default_device_backend_map = {"cpu": GLOO, "cuda": NCCL}
    backend_capability = {GLOO: ["cpu"], NCCL: ["cuda"], MPI: ["cpu"]}
    backend_type_map: dict = {UNDEFINED: UNDEFINED, GLOO: GLOO, NCCL: NCCL, MPI: MPI}
    _plugins: dict = {}
    BACKEND_TO_MAP: dict = {NCCL: None}

    def __new__(cls, name: str) -> str:
        if not isinstance(name, str):
            raise ValueError("Backend constructor parameter must be string-ish")
        value = getattr(cls, name.upper(), None)
        return str.__new__(cls, value if value is not None else name.lower())

    @classmethod
    def _ensure_backend_registered(cls, name: str) -> None:
        normalized = str(name).lower()
        if normalized in cls.backend_list or normalized.upper() in cls._plugins:
            return
        try:
            from importlib.metadata import entry_points
            candidates = entry_points(group="paddle_like.distributed.backends")
        except Exception:  # noqa: BLE001 - no metadata: no entry points
            candidates = ()
        for entrypoint in candidates:
            if entrypoint.name.lower() != normalized:
                continue
            registrar = entrypoint.load()
            if not callable(registrar):
                raise TypeError("backend entry point must load a callable registrar")
            registrar()
            if normalized not in cls.backend_list:
                raise RuntimeError(f"backend entry point {normalized} did not register a backend")
            return

    @classmethod
    def register_backend(cls, name: str, func: Callable[..., Any], extended_api: bool = False,
                         devices=None, *, _backend_type: Optional[str] = None) -> None:
        normalized = str(name).lower()
        if not normalized or ":" in normalized or "," in normalized:
            raise ValueError("backend name must be a single non-empty identifier")
        if not callable(func):
            raise TypeError("backend creator must be callable")
        if isinstance(devices, str):
            devices = [devices]
        if devices is None:
            devices = ["cpu"]
        devices = [str(device).lower() for device in devices]
        if not devices:
            raise ValueError("backend devices must not be empty")
        upper = normalized.upper()
        if not hasattr(cls, upper):
            setattr(cls, upper, normalized)
        if normalized not in cls.backend_list:
            cls.backend_list.append(normalized)
        cls.backend_capability[normalized] = devices
        cls.backend_type_map[normalized] = _backend_type or "custom"
        cls._plugins[upper] = (func, bool(extended_api))
        cls.BACKEND_TO_MAP[normalized] = func
        for device in devices:
            cls.default_device_backend_map.setdefault(device, normalized)


class ReduceOp:
    SUM = 0
    AVG = 1
    PRODUCT = PROD = 2
    MIN = 3
    MAX = 4
    BAND = 5
    BOR = 6
    BXOR = 7
    PREMUL_SUM = 8
    UNUSED = 9


def supports_complex(reduce_op) -> bool:
    """Whether a reduction accepts complex tensors (SUM, AVG, PREMUL_SUM do)."""
    if isinstance(reduce_op, str):
        return reduce_op.lower() not in {"product", "min", "max", "band", "bor", "bxor"}
    try:
        value = int(reduce_op)
    except (TypeError, ValueError):
        operation = getattr(reduce_op, "op", None)
        if callable(operation):
            return supports_complex(operation())
        return True
    return value not in {ReduceOp.PRODUCT, ReduceOp.MIN, ReduceOp.MAX, ReduceOp.BAND,
                         ReduceOp.BOR, ReduceOp.BXOR}


def _unset_timeout():
    return field(default_factory=lambda: _dt.timedelta(milliseconds=-1))


@dataclass
class BroadcastOptions:
    rootRank: int = 0
    rootTensor: int = 0
    timeout: _dt.timedelta = _unset_timeout()
    asyncOp: bool = True


@dataclass
class AllreduceOptions:
    reduceOp: int = ReduceOp.SUM
    timeout: _dt.timedelta = _unset_timeout()
    asyncOp: bool = True
    sparseIndices: Any = None


@dataclass
class AllreduceCoalescedOptions(AllreduceOptions):
    pass


@dataclass
class ReduceOptions:
    reduceOp: int = 0
    rootRank: int = 0
    rootTensor: int = 0
    timeout: _dt.timedelta = _unset_timeout()
    asyncOp: bool = True


@dataclass
class AllgatherOptions:
    timeout: _dt.timedelta = _unset_timeout()
    asyncOp: bool = True


@dataclass
class GatherOptions:
    rootRank: int = 0
    timeout: _dt.timedelta = _unset_timeout()
    asyncOp: bool = True


@dataclass
class ScatterOptions:
    rootRank: int = 0
    timeout: _dt.timedelta = _unset_timeout()
    asyncOp: bool = True


@dataclass
class ReduceScatterOptions:
    reduceOp: int = 0
    timeout: _dt.timedelta = _unset_timeout()
    asyncOp: bool = True


@dataclass
class AllToAllOptions:
    timeout: _dt.timedelta = _unset_timeout()
    asyncOp: bool = True


@dataclass
class BarrierOptions:
    device_ids: list = field(default_factory=list)
    timeout: _dt.timedelta = _unset_timeout()
    device: Any = None
    asyncOp: bool = True


def _active_device() -> str:
    # This build runs CPU tensors through Python; CUDA arrays have no zero-copy path here.
    return "cpu"


class BackendConfig:
    """Maps device types to the backend selected for each."""

    def __init__(self, backend):
        self.device_backend_map: dict = {}
        normalized = str(backend).lower()
        if normalized == Backend.UNDEFINED:
            device = _active_device()
            self.device_backend_map[device] = Backend.default_device_backend_map[device]
            return
        if ":" not in normalized:
            Backend._ensure_backend_registered(normalized)
            if normalized not in Backend.backend_list:
                raise ValueError(f"Unknown backend: '{backend}'")
            devices = Backend.backend_capability.get(normalized, ["cpu"])
            self.device_backend_map = {device: normalized for device in devices}
            return
        for pair in normalized.split(","):
            pieces = pair.split(":")
            if len(pieces) != 2 or not pieces[0] or not pieces[1]:
                raise ValueError(
                    "backend must use '<device>:<backend>' pairs separated by commas")
            device, backend_name = pieces
            if device in self.device_backend_map:
                raise ValueError(f"Duplicate device type '{device}'")
            Backend._ensure_backend_registered(backend_name)
            if backend_name not in Backend.backend_list:
                raise ValueError(f"Unknown backend: '{backend_name}'")
            self.device_backend_map[device] = backend_name

    def __repr__(self) -> str:
        return ",".join(f"{device}:{backend}"
                        for device, backend in self.device_backend_map.items())

    def get_device_backend_map(self) -> dict:
        return dict(self.device_backend_map)


class GroupMember:
    NON_GROUP_MEMBER = -100
    WORLD: Optional[Any] = None


def is_backend_compiled(name: str) -> bool:
    return {
        Backend.GLOO: _C.is_gloo_available,
        Backend.NCCL: _C.is_nccl_available,
        Backend.MPI: _C.is_mpi_available,
    }.get(name, lambda: False)()
