"""What the commands that run a model share: the layered model and its inputs, each
problem as one InputError naming the option (`_` keeps it out of command discovery)."""

from __future__ import annotations

import os
from pathlib import Path

from planner.core.errors import InputError


def layered_model(path: str, weights: str, seed: int, option: str = "--model"):  # noqa: ANN201
    """executor.slicing's layered model of an ONNX file (computed weights materialised),
    refused with the figure when its declared shapes need more memory than there is."""
    from executor.slicing import SlicingError, check_memory, layers, load_model, materialise

    try:
        lm = layers(materialise(load_model(path), weights, seed), materialised=True)
        check_memory(lm)
        return lm
    except SlicingError as exc:
        raise InputError(option, str(exc)) from None


def output_problems(problems: list[str], option: str, path: str | None) -> None:
    """Add why `path` cannot be written (no such directory, a directory, not writable)
    to `problems`: checked before a run, not found out after it."""
    if not path:
        return
    target = Path(path)
    parent = target.parent
    if target.is_dir():
        problems.append(f"{option}: {path} is a directory; give a file name")
    elif not parent.is_dir():
        problems.append(f"{option}: no such directory: {parent}")
    elif not os.access(parent, os.W_OK) or (target.exists() and not os.access(target, os.W_OK)):
        problems.append(f"{option}: cannot write {path} (permission denied)")


def model_inputs(lm, path: str | None, seed: int) -> dict:  # noqa: ANN001
    """The model's inputs from an .npz by name, or seeded random ones."""
    import numpy as np

    from executor.slicing import random_inputs

    if not path:
        return random_inputs(lm, seed)
    try:
        with np.load(path) as data:
            inputs = {k: data[k] for k in data.files}
    except (OSError, ValueError) as exc:
        raise InputError("--inputs", f"cannot read {path}: {exc}") from None
    absent = [n for n in lm.graph_inputs if n not in inputs]
    if absent:
        raise InputError("--inputs", f"missing input(s) {', '.join(absent)} (the model takes {', '.join(lm.graph_inputs)})")
    return inputs


def runtime_devices(specs, problems: list[str], clock: str | None = None, option: str = "--device") -> list:  # noqa: ANN001
    """The runtime devices of `ID=PROVIDER[:k=v,...]` specs; a bad spec (or a clock the
    devices cannot use) is added to `problems`, so the command lists every problem at once."""
    from executor.runtime import DeviceSpecError, clock_ns, parse_devices

    try:
        devices = parse_devices(specs)
        if clock is not None:
            clock_ns(clock, devices)
        return devices
    except DeviceSpecError as exc:
        problems.append(f"{option}: {exc}")
        return []
