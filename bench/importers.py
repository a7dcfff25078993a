"""Importer cost against file size: a PyTorch trace of growing event count (labels, ops,
kernels; tests/support/traces.py) parsed by `planner import`'s reader, and a file of empty
objects refused before parsing. Goal (issue 21.10): time linear in the events (the time
per event stays flat as the file grows 16x) and memory a small multiple of the file. Each
size runs in a fresh subprocess so its peak RSS is its own; figures are ratios measured
in one run on a shared machine, not capacity claims.

    .venv/bin/python bench/importers.py [--max-steps 400] [--empty-mb 150]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, sys.argv[1])
from executor.importers import read
from planner.core.errors import InputError
t = time.perf_counter()
try:
    [tr] = read(sys.argv[2], [sys.argv[3]], "gpu")
    what = f"{len(tr.records)} records x {tr.runs} runs"
except InputError as exc:
    what = "refused: " + str(exc)[:120]
dt = time.perf_counter() - t
print(json.dumps({"s": dt, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "what": what}))
"""


def child(fmt: str, path: Path) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, str(ROOT), fmt, str(path)], capture_output=True, text=True,
                         check=True, timeout=600)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--max-steps", type=int, default=400, help="largest trace: this many steps of 66 labelled layers")
    ap.add_argument("--empty-mb", type=int, default=150, help="size of the file of empty objects")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "importers.json"))
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from tests.support.traces import synthetic_torch_trace

    base = child("pytorch", ROOT / "tests" / "fixtures" / "importers" / "pytorch_trace.json")["peak_rss_mb"]
    rows = []
    with tempfile.TemporaryDirectory() as d:
        steps = max(1, args.max_steps // 16)
        while steps <= args.max_steps:
            path = Path(d) / f"t{steps}.json"
            doc = synthetic_torch_trace(steps=steps, layers=66)
            path.write_text(json.dumps(doc))
            r = child("pytorch", path)
            events, mb = len(doc["traceEvents"]), path.stat().st_size / 2**20
            rows.append({"events": events, "file_mb": round(mb, 2), "s": round(r["s"], 4),
                         "us_per_event": round(1e6 * r["s"] / events, 2),
                         "rss_over_baseline_mb": round(r["peak_rss_mb"] - base, 1), "what": r["what"]})
            print(f"{events:>8} events {mb:7.2f} MB  {r['s']:7.3f} s  {rows[-1]['us_per_event']:6.2f} us/event  "
                  f"peak RSS +{rows[-1]['rss_over_baseline_mb']:.0f} MB over an import of a tiny file")
            steps *= 4
        empty = Path(d) / "empty.json"
        with empty.open("w") as f:
            f.write("[")
            chunk = "{}," * (1 << 20)
            for _ in range(args.empty_mb * 2**20 // len(chunk)):
                f.write(chunk)
            f.write("{}]")
        r = child("onnxruntime", empty)
        mb = empty.stat().st_size / 2**20
        print(f"empty objects {mb:.0f} MB: {r['s']:.2f} s, peak RSS +{r['peak_rss_mb'] - base:.0f} MB; {r['what']}")
    ratio = rows[-1]["us_per_event"] / rows[0]["us_per_event"]
    print(f"time per event, largest / smallest trace: {ratio:.2f} (linear: about 1; the quadratic parser grew with size)")
    result = {"traces": rows, "per_event_ratio_largest_smallest": round(ratio, 2),
              "empty_objects": {"file_mb": round(mb), "s": round(r["s"], 2),
                                "rss_over_baseline_mb": round(r["peak_rss_mb"] - base), "what": r["what"]},
              "host": "shared 2-core development machine"}
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
