"""Where energy comes from: a real power source, or none.

Readers answer `energy_mj()`, a monotonic counter of energy consumed (the profiler reads
it around a batch of runs). `detect()` finds one on this board or says why there is none:

- RAPL (`/sys/class/powercap/intel-rapl:N/energy_uj`), the package energy counter of x86;
- hwmon power sensors (`/sys/class/hwmon/*/power*_input`, microwatts; INA3221 rails on
  Jetson boards), integrated by a sampling thread;
- a CSV from an external meter (`unix_time_s,power_w` rows, the meter's clock = this
  host's), integrated over the window asked.

No reader, no joules: the profile then records `energy_source` = the reason, its
measurements are time-only, and energy requests on it are refused.
"""

from __future__ import annotations

import csv
import glob
import os
import threading
import time
from dataclasses import dataclass


class PowerReader:
    name = "power"

    def energy_mj(self) -> float:  # pragma: no cover - interface
        raise NotImplementedError

    def close(self) -> None:
        pass


@dataclass
class RaplReader(PowerReader):
    path: str  # .../intel-rapl:0

    @property
    def name(self) -> str:  # type: ignore[override]
        return f"rapl:{self.path}"

    def __post_init__(self):
        with open(os.path.join(self.path, "max_energy_range_uj")) as f:
            self.range_uj = int(f.read())
        self.last = self._raw()
        self.total_uj = 0

    def _raw(self) -> int:
        with open(os.path.join(self.path, "energy_uj")) as f:
            return int(f.read())

    def energy_mj(self) -> float:
        now = self._raw()
        self.total_uj += (now - self.last) % (self.range_uj + 1)  # the counter wraps
        self.last = now
        return self.total_uj / 1000.0


class HwmonReader(PowerReader):
    """Sum of the given power*_input sensors (uW), integrated every `period_s`."""

    def __init__(self, paths: list[str], period_s: float = 0.001):
        self.paths = paths
        self.name = "hwmon:" + ",".join(paths)
        self.period_s = period_s
        self._mj = 0.0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _power_w(self) -> float:
        total = 0.0
        for p in self.paths:
            with open(p) as f:
                total += int(f.read()) / 1e6
        return total

    def _loop(self) -> None:
        last = time.perf_counter()
        while not self._stop.wait(self.period_s):
            now = time.perf_counter()
            w = self._power_w()
            with self._lock:
                self._mj += w * (now - last) * 1000.0
            last = now

    def energy_mj(self) -> float:
        with self._lock:
            return self._mj

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=1.0)


class CsvMeter(PowerReader):
    """An external meter's log: rows `unix_time_s,power_w`; energy is the trapezoid
    integral of the log up to now (re-read on every call: the meter keeps writing)."""

    def __init__(self, path: str):
        self.path = path
        self.name = f"csv:{path}"
        if not os.path.exists(path):
            raise ValueError(f"power CSV '{path}' does not exist")

    def energy_mj(self) -> float:
        rows = []
        with open(self.path, newline="") as f:
            for row in csv.reader(f):
                try:
                    rows.append((float(row[0]), float(row[1])))
                except (ValueError, IndexError):
                    continue  # header or a torn last line
        now = time.time()
        rows = [r for r in rows if r[0] <= now]
        mj = 0.0
        for (t0, p0), (t1, p1) in zip(rows, rows[1:]):
            mj += (p0 + p1) / 2.0 * (t1 - t0) * 1000.0
        return mj


def detect(csv_path: str | None = None) -> tuple[PowerReader | None, str]:
    """(reader, description) or (None, the reason there is none)."""
    if csv_path:
        meter = CsvMeter(csv_path)
        return meter, meter.name
    for zone in sorted(glob.glob("/sys/class/powercap/intel-rapl:[0-9]*")):
        if ":" in os.path.basename(zone)[len("intel-rapl:"):]:
            continue  # sub-zones (core, uncore) are inside the package zone
        try:
            reader = RaplReader(zone)
            return reader, reader.name
        except OSError:
            continue  # not readable (needs root on recent kernels)
    sensors = sorted(glob.glob("/sys/class/hwmon/hwmon*/power*_input"))
    if sensors:
        try:
            reader = HwmonReader(sensors)
            return reader, reader.name
        except OSError:
            pass
    return None, "none: no readable RAPL (/sys/class/powercap), hwmon power sensor or --power-csv on this host"
