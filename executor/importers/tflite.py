"""TensorFlow Lite `benchmark_model --enable_op_profiling=true` output (its stdout/log,
or the file of `--profiling_output_csv_file`'s text form). Format as printed by the
profile summarizer of TensorFlow 2.x (tensorflow/lite/tools/benchmark README,
"Profiling model operators"): after the header `Operator-wise Profiling Info for
Regular Benchmark Runs:`, the `Run Order` table with columns `[node type]`,
(`[start]`, before TF 2.13), `[first]`, `[avg ms]`, `[%]`, `[cdf%]`, `[mem KB]`,
`[times called]`, `[Name]`; a row's name is `[tensor names]:node index`, several
tensors comma-separated for a delegate partition. The table ends at the next
`=====` banner; `Timings (microseconds): count=N` gives the number of runs.

A row's `avg ms` is the node's time per run (all its calls in a run). Names are
matched by their output tensor names (TFLite names a node by them); give --profile
or --model with those names, or the layers are the table's rows.
"""

from __future__ import annotations

import re

from executor.importers.common import MAX_DURATION_MS, read_text
from executor.importers.trace import OpRecord, Trace
from planner.core.errors import InputError

HEADER = "Operator-wise Profiling Info for Regular Benchmark Runs"
_COLUMN = re.compile(r"\[([^\]]+)\]")
_NUM = r"-?\d+(?:\.\d+)?%?"
_NAME = re.compile(r"^\[(?P<tensors>.*)\](?::(?P<index>\d+))?$")


def _row_pattern(numeric: int) -> re.Pattern:
    return re.compile(rf"^\s*(?P<type>\S.*?)\s+(?P<nums>(?:{_NUM}\s+){{{numeric}}})(?P<name>\S.*?)\s*$")


def _plain(text: str, where: str, column: str) -> float:
    """A column that must hold a plain number (the `%` columns may not stand in for it)."""
    try:
        if text.endswith("%"):
            raise ValueError
        return float(text)
    except ValueError:
        raise InputError(where, f"{column} must be a plain number, got {text!r}"[:200]) from None


def parse(path: str, device: str) -> Trace:
    text = read_text(path)
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if HEADER in line), None)
    if start is None:
        raise InputError(path, f"no '{HEADER}' section: was benchmark_model run with --enable_op_profiling=true?")
    order = next((i for i in range(start, len(lines)) if "Run Order" in lines[i]), None)
    if order is None or order + 1 >= len(lines):
        raise InputError(path, "no 'Run Order' table after the profiling header")
    columns = [c.strip().lower() for c in _COLUMN.findall(lines[order + 1])]
    if not columns or columns[0] != "node type" or columns[-1] != "name" or "avg ms" not in columns:
        raise InputError(f"{path}: line {order + 2}", f"unexpected table header {lines[order + 1].strip()!r}")
    numeric = columns[1:-1]
    avg_col, calls_col = numeric.index("avg ms"), numeric.index("times called") if "times called" in numeric else None
    row_re = _row_pattern(len(numeric))
    records: list[OpRecord] = []
    end = order + 2
    for end in range(order + 2, len(lines)):
        line = lines[end]
        if line.strip().startswith("====") or not line.strip():
            break
        line = re.sub(r"^\s*INFO:\s", "", line)
        m = row_re.match(line.replace("\t", "  "))
        if m is None:
            raise InputError(f"{path}: line {end + 1}", f"cannot read this row of the Run Order table: {line.strip()!r}")
        nums = m.group("nums").split()
        avg_ms = _plain(nums[avg_col], f"{path}: line {end + 1}", "[avg ms]")
        if not 0 <= avg_ms <= MAX_DURATION_MS:
            raise InputError(f"{path}: line {end + 1}", f"[avg ms] must be 0 to {MAX_DURATION_MS:.0f}, got {nums[avg_col]}")
        name = m.group("name")
        nm = _NAME.match(name)
        parts = tuple(p.strip() for p in nm.group("tensors").split(",") if p.strip()) if nm else (name,)
        calls = int(_plain(nums[calls_col], f"{path}: line {end + 1}", "[times called]")) if calls_col is not None else None
        rec = OpRecord(name=parts[-1] if nm and len(parts) == 1 else name, op_type=m.group("type").strip(),
                       parts=parts, samples_ms=[avg_ms])
        if calls and calls > 1:
            rec.op_type = rec.op_type[:50] + f" x{calls}"
        records.append(rec)
    if not records:
        raise InputError(path, "the Run Order table has no rows")
    runs = None
    for line in lines[end:]:
        t = re.search(r"Timings \(microseconds\): count=(\d+)", line)
        if t:
            runs = int(t.group(1))
            break
    for rec in records:
        rec.runs = runs
    return Trace("tflite", path, device, records, runs, [])
