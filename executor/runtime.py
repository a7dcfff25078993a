"""Runtime devices: `ID=PROVIDER[:key=value,...]` parsed into a `RuntimeDevice`, and the
session a slice gets on it, built by the device's runtime (executor.runtimes).

A device is a runtime target plus options, so one physical CPU can be several planner
devices (one thread pinned to core 0, two threads, int8, OpenVINO). On ONNX Runtime
(PROVIDER an execution provider) nothing is special-cased per provider: the keys this
module knows are about the *session* (threads, affinity, precision, graph optimisation,
`session.*` config entries); every other key is handed to the provider as a provider
option, verbatim, and the provider judges it. `ID=openvino[:DEVICE][,key=value,...]` is
a device of OpenVINO (DEVICE: CPU by default; other keys are OpenVINO properties).
"""

from __future__ import annotations

import os
import re
import threading
import time
from dataclasses import dataclass
from typing import Iterable

from executor import runtimes
from planner.core.names import nearest
from executor.runtimes.onnxruntime import OPT_LEVELS, POOL_POLICIES  # noqa: F401 - re-exported
from executor.runtimes.onnxruntime import session_options as _ort_session_options

SESSION_KEYS = {
    "threads": "intra-op threads (SessionOptions.intra_op_num_threads); default: the provider's",
    "inter_threads": "inter-op threads (SessionOptions.inter_op_num_threads)",
    "affinity": "cores the device runs on, e.g. 0, 0-3 or 0+2 (0-based; calling thread and pool threads)",
    "precision": "fp32 (default) or int8 (static QDQ quantisation with calibration data); OpenVINO also bf16",
    "opt": "graph optimisation: disable, basic, extended, all (default all)",
}
PRECISIONS = ("fp32", "int8")
# keys of ONNX Runtime's session only; another runtime takes threads, affinity, precision
# and its own properties
_ORT_ONLY = ("inter_threads", "opt")
_ID = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:/+-]{0,63}$")


class DeviceSpecError(ValueError):
    """A device spec that cannot be used; the message names the spec and every problem."""


@dataclass(frozen=True)
class RuntimeDevice:
    """One planner device: `provider` is the runtime's target (an ONNX Runtime execution
    provider, or OpenVINO's device name), `provider_options` what is handed to it."""

    id: str
    provider: str
    threads: int | None = None
    inter_threads: int | None = None
    affinity: tuple[int, ...] | None = None
    precision: str = "fp32"
    opt: str = "all"
    session_config: tuple[tuple[str, str], ...] = ()
    provider_options: tuple[tuple[str, str], ...] = ()
    spec: str = ""
    runtime: str = runtimes.DEFAULT

    def session_options(self, policy: str = "stop"):
        """SessionOptions for a session of this device under a thread-pool `policy`
        (POOL_POLICIES): "plain" is ONNX Runtime's defaults (a one-slice plan runs as a
        plain session of the device would); "stop" lets the pool spin inside a run and
        stops it when the run returns (a slice of a multi-slice plan: fast while active,
        and an idle pool does not busy-wait on the cores the next slice needs); "off"
        never spins. `session.*` entries of the spec win over the policy."""
        return _ort_session_options(self, policy)

    def providers(self) -> list:
        return [(self.provider, dict(self.provider_options))]

    def describe(self) -> str:
        parts = [f"{self.provider}" if self.runtime == runtimes.DEFAULT else f"{self.runtime} {self.provider}"]
        if self.threads is not None:
            parts.append(f"{self.threads} thread(s)")
        if self.affinity is not None:
            parts.append("cores " + ",".join(map(str, self.affinity)))
        parts.append(self.precision)
        return ", ".join(parts)


def _parse_cores(text: str) -> tuple[int, ...]:
    cores: list[int] = []
    for part in text.split("+"):
        lo, sep, hi = part.partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()):
            raise ValueError(f"'{text}' is not a core list (e.g. 0, 0-3, 0+2)")
        a, b = int(lo), int(hi) if sep else int(lo)
        if b < a:
            raise ValueError(f"range '{part}' runs backwards")
        cores.extend(range(a, b + 1))
    return tuple(sorted(set(cores)))


# ONNX Runtime providers known to take no provider option: it ignores one without a word
# (CPUExecutionProvider's get_provider_options() is empty whatever it was given), so a
# misspelled session key there (thread=1) would profile with the default thread count
NO_PROVIDER_OPTIONS = ("CPUExecutionProvider",)


def _unknown_key(key: str, runtime: str, provider: str) -> str | None:
    """Why `key` is refused, or None where it goes to the provider: refused on a provider
    that takes no options, and anywhere it is one typo away from a session key."""
    known = list(SESSION_KEYS) if runtime == runtimes.DEFAULT else [k for k in SESSION_KEYS if k not in _ORT_ONLY]
    close = nearest(key, known, cutoff=0.75)
    if runtime == runtimes.DEFAULT and provider in NO_PROVIDER_OPTIONS:
        return (f"unknown key '{key}' ({'did you mean ' + repr(close) + '? ' if close else ''}keys: "
                f"{', '.join(known)}, session.*; {provider} takes no provider options)")
    if close is not None:
        return f"unknown key '{key}' (did you mean '{close}'? keys: {', '.join(known)}, or the provider's own)"
    return None


def _precisions(runtime: str) -> tuple[str, ...]:
    try:
        return runtimes.get(runtime).precisions
    except runtimes.RuntimeUnavailable:  # reported once, after the keys
        return PRECISIONS


def parse_device(spec: str, available: Iterable[str] | None = None) -> RuntimeDevice:
    """`ID=PROVIDER[:key=value,...]` -> RuntimeDevice. Raises DeviceSpecError listing
    every problem (unknown provider with the installed ones, bad values, cores that
    this process may not run on). PROVIDER `openvino` (a runtime's name, executor.runtimes)
    makes an OpenVINO device: `ID=openvino[:DEVICE][,key=value,...]`, DEVICE CPU by
    default; `available` lists ONNX Runtime's providers (default: the installed ones)."""
    problems: list[str] = []
    dev_id, eq, rest = spec.partition("=")
    if not eq:
        raise DeviceSpecError(f"device '{spec}': expected ID=PROVIDER[:key=value,...]")
    dev_id = dev_id.strip()
    if not _ID.match(dev_id):
        problems.append(f"id '{dev_id}' must be 1-64 letters, digits or _ . : / + -")
    provider, _, opts = rest.partition(":")
    provider = provider.strip()
    items = [x for x in (x.strip() for x in opts.split(",")) if x] if opts else []
    runtime = provider if provider in runtimes.NAMES and provider != runtimes.DEFAULT else runtimes.DEFAULT
    if runtime == runtimes.DEFAULT:
        available = list(runtimes.get(runtime).targets() if available is None else available)
        if provider not in available:
            problems.append(f"provider '{provider}' is not available (onnxruntime.get_available_providers(): {', '.join(available)})")
    else:  # the runtime's device: the first item when it is not key=value
        provider = items.pop(0) if items and "=" not in items[0] else "CPU"
    values: dict = {}
    config: list[tuple[str, str]] = []
    provider_options: list[tuple[str, str]] = []
    seen: set[str] = set()
    for item in items:
        key, eq, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if runtime != runtimes.DEFAULT and (key in _ORT_ONLY or key.startswith("session.")):
            problems.append(f"'{key}' is an ONNX Runtime session key; {runtime} takes threads, affinity, precision "
                            f"and its own properties")
            continue
        if not eq or not key or not value:
            problems.append(f"'{item}' is not key=value")
            continue
        if key in seen:
            problems.append(f"'{key}' given twice")
            continue
        seen.add(key)
        try:
            if key in ("threads", "inter_threads"):
                if not value.isdigit() or int(value) < 1:
                    raise ValueError(f"{key} must be a positive integer, got '{value}'")
                values[key] = int(value)
            elif key == "affinity":
                cores = _parse_cores(value)
                allowed = PROCESS_CORES
                bad = [c for c in cores if c not in allowed]
                if bad:
                    raise ValueError(f"core(s) {bad} are not available to this process (allowed: {sorted(allowed)})")
                values[key] = cores
            elif key == "precision":
                allowed = _precisions(runtime)
                if value not in allowed:
                    raise ValueError(f"precision must be one of {', '.join(allowed)}, got '{value}'")
                values[key] = value
            elif key == "opt":
                if value not in OPT_LEVELS:
                    raise ValueError(f"opt must be one of {', '.join(OPT_LEVELS)}, got '{value}'")
                values[key] = value
            elif key.startswith("session."):
                config.append((key, value))
            elif (why := _unknown_key(key, runtime, provider)) is not None:
                raise ValueError(why)
            else:
                provider_options.append((key, value))
        except ValueError as exc:
            problems.append(str(exc))
    device = RuntimeDevice(
        id=dev_id,
        provider=provider,
        session_config=tuple(config),
        provider_options=tuple(provider_options),
        spec=spec,
        runtime=runtime,
        **values,
    )
    if runtime != runtimes.DEFAULT:
        try:
            problems.extend(runtimes.get(runtime).check(device))
        except runtimes.RuntimeUnavailable as exc:
            problems.append(str(exc))
    if problems:
        raise DeviceSpecError(f"device '{spec}': " + "; ".join(problems))
    return device


def parse_devices(specs: Iterable[str]) -> list[RuntimeDevice]:
    """Several specs; every problem of every spec in one error, duplicate ids refused."""
    out, problems = [], []
    for spec in specs:
        try:
            out.append(parse_device(spec))
        except DeviceSpecError as exc:
            problems.append(str(exc))
    ids = [d.id for d in out]
    for d in sorted({i for i in ids if ids.count(i) > 1}):
        problems.append(f"device id '{d}' declared twice")
    if not out and not problems:
        problems.append("no device given (--device ID=PROVIDER[:key=value,...])")
    if problems:
        raise DeviceSpecError("; ".join(problems))
    return out


_PIN = threading.local()
# the cores the process was given, read once at import: a thread that `pinned` moved
# must still be able to declare devices on the other cores
PROCESS_CORES = frozenset(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else frozenset(range(os.cpu_count() or 1))


def caller_cores(device: RuntimeDevice) -> tuple[int, ...] | None:
    """The cores the thread that runs `device`'s session is pinned to: the first of its
    cores where the runtime puts each pool thread on a core of its own (ORT: the caller is
    the first intra-op thread, the workers on the next cores), else all of them (a
    runtime whose threads inherit the caller's cores). None: no affinity."""
    if device.affinity is None:
        return None
    threads = device.threads or 1
    if 1 < threads <= len(device.affinity) and getattr(runtimes.get(device.runtime), "places_pool_threads", False):
        return tuple(device.affinity)[:1]
    return tuple(device.affinity)


class pinned:
    """Context manager running the calling thread on a device's cores (caller_cores: the
    first one where the pool's threads have the others one each, so a woken worker is
    never stacked on the caller's core). A device without affinity runs on every core
    the process was given. The thread stays where it was put after the block, so
    consecutive slices on one device make no system call; only a change of device moves
    the thread."""

    def __init__(self, device: RuntimeDevice):
        cores = caller_cores(device)
        self.cores = frozenset(cores) if cores is not None else None

    def __enter__(self):
        if not hasattr(os, "sched_setaffinity"):
            return self
        if not hasattr(_PIN, "all"):
            _PIN.all = PROCESS_CORES
            _PIN.current = _PIN.all
        want = self.cores if self.cores is not None else _PIN.all
        if want != _PIN.current:
            os.sched_setaffinity(0, want)
            _PIN.current = want
        return self

    def __exit__(self, *exc):
        return False


def pin_thread(cores) -> None:  # noqa: ANN001 - a set of core numbers
    """Put the calling thread on `cores` for good (a harness worker built elsewhere, now
    on the cores it is timed on); `pinned` then moves it only for a device elsewhere."""
    os.sched_setaffinity(0, cores)
    if not hasattr(_PIN, "all"):
        _PIN.all = PROCESS_CORES
    _PIN.current = frozenset(cores)


def unpin() -> None:
    """Put the calling thread back on every core it started with."""
    if hasattr(_PIN, "all") and _PIN.current != _PIN.all:
        os.sched_setaffinity(0, _PIN.all)
        _PIN.current = _PIN.all


CLOCKS = {"wall": time.perf_counter_ns, "thread": time.thread_time_ns}


def clock_ns(name: str, devices: Iterable[RuntimeDevice] = ()):
    """The timer of a measurement, in ns. "wall": elapsed time (what latency is).
    "thread": the calling thread's CPU time, which does not count the time other
    processes held the core (on a shared machine, the latency the device would have to
    itself); valid only where the calling thread does all the work: every device
    threads=1 on the CPU provider (ORT runs a one-thread session on the caller)."""
    if name not in CLOCKS:
        raise DeviceSpecError(f"clock must be one of {', '.join(CLOCKS)}, got '{name}'")
    if name == "thread":
        bad = [d.id for d in devices if d.threads != 1 or d.provider != "CPUExecutionProvider" or d.runtime != runtimes.DEFAULT]
        if bad:
            raise DeviceSpecError(
                f"clock 'thread' counts the calling thread only: device(s) {', '.join(bad)} must be "
                "CPUExecutionProvider with threads=1 (OpenVINO runs on threads of its own)"
            )
    return CLOCKS[name]


def build_session(model, device: RuntimeDevice, policy: str = "stop"):
    """A session for `model` (ModelProto, bytes or path) on `device`, built by its
    runtime (executor.runtimes): `session.run(output_names, feed)` -> arrays. The model
    is expected to be in the device's precision already (see `quantize`). Built on the
    device's cores: pool threads inherit the creating thread's affinity, so a device
    without affinity built while the caller was pinned for another device would keep
    its pool threads on that device's cores for good. `policy`: the thread-pool policy
    (POOL_POLICIES; a runtime without them ignores it)."""
    if policy not in POOL_POLICIES:
        raise ValueError(f"pool policy must be one of {', '.join(POOL_POLICIES)}, got '{policy}'")
    data = model.SerializeToString() if hasattr(model, "SerializeToString") else model
    rt = runtimes.get(device.runtime)
    before = getattr(_PIN, "current", None)
    try:
        with pinned(device):
            return rt.build(data, device, policy)
    finally:  # the caller stays where it was
        if before is None:
            unpin()
        elif _PIN.current != before:
            os.sched_setaffinity(0, before)
            _PIN.current = before


def quantize(model, device: RuntimeDevice, calibration):
    """`model` (ModelProto) in int8 as `device`'s runtime runs it, calibrated on
    `calibration` feeds (dicts input name -> array)."""
    return runtimes.get(device.runtime).quantize(model, calibration)


def runtime_versions(devices: Iterable[RuntimeDevice]) -> str:
    """The runtimes (name and version) that `devices` run on, e.g. "onnxruntime 1.23.2,
    openvino 2026.4.1": what a profile records as having measured."""
    names = dict.fromkeys([runtimes.DEFAULT] + [d.runtime for d in devices])  # ORT always: it makes the references
    return ", ".join(runtimes.get(n).version() for n in names)
