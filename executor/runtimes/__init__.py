"""Runtimes: what builds and runs a slice's session on a device. One module per runtime,
each exposing `RUNTIME`, an object with the members of `Runtime` below; `executor.runtime`
parses device specs and dispatches `build_session` to the device's runtime, so slicing,
the profiler, execution, the agent and pipelined schedules never name a runtime.

    onnxruntime  ID=PROVIDER[:key=value,...]          (any installed execution provider)
    openvino     ID=openvino[:DEVICE][,key=value,...]  (CPU here; GPU/NPU where present)

A new runtime: a module here with `RUNTIME`, its name added to `NAMES`. It is imported
only when a device names it, so a board without the package still runs the others.
"""

from __future__ import annotations

import importlib
from typing import Any, Mapping, Protocol, Sequence

# runtime name -> module in this package; "onnxruntime" is the default (a spec's
# PROVIDER that is not a runtime name is an ONNX Runtime execution provider)
NAMES = {"onnxruntime": "onnxruntime", "openvino": "openvino"}
DEFAULT = "onnxruntime"


class Session(Protocol):
    """A built slice: `run(output_names, feed)` -> the outputs' arrays in that order
    (onnxruntime.InferenceSession's call, which the sliced run loop makes)."""

    def run(self, output_names: Sequence[str], feed: Mapping[str, Any]) -> list: ...


class Runtime(Protocol):
    name: str
    precisions: tuple[str, ...]  # what `precision=` may say on this runtime
    pool_policies: bool  # whether the thread-pool policies (runtime.POOL_POLICIES) apply
    places_pool_threads: bool  # each pool thread on a core of its own: the caller is pinned to the first only

    def version(self) -> str:
        """`name version`, recorded in a profile's regime and platform source."""

    def targets(self) -> list[str]:
        """The devices (ORT: execution providers) this process can use."""

    def check(self, device) -> list[str]:  # noqa: ANN001 - executor.runtime.RuntimeDevice
        """Problems of a parsed device that only this runtime can judge (unknown keys,
        unavailable targets); [] when it can be built."""

    def build(self, model, device, policy: str) -> Session:  # noqa: ANN001
        """A session of the ONNX `model` (serialised bytes or a path) on `device` (the
        caller has pinned the thread to the device's cores)."""

    def quantize(self, model, calibration):  # noqa: ANN001
        """The model in int8 for this runtime, calibrated on `calibration` feeds."""


_LOADED: dict[str, Runtime] = {}


class RuntimeUnavailable(ValueError):
    """A device names a runtime whose package is not installed here."""


def get(name: str) -> Runtime:
    """The runtime called `name`, imported on first use."""
    if name not in NAMES:
        raise RuntimeUnavailable(f"runtime '{name}' is not known (known: {', '.join(NAMES)})")
    if name not in _LOADED:
        try:
            module = importlib.import_module(f"executor.runtimes.{NAMES[name]}")
        except ImportError as exc:
            raise RuntimeUnavailable(f"runtime '{name}' is not installed here ({exc}; pip install {name})") from None
        _LOADED[name] = module.RUNTIME
    return _LOADED[name]
