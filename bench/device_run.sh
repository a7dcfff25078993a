#!/usr/bin/env bash
# The quiet-host check on a borrowed host without network, in one prepared command:
# installs the wheels carried in .whl/ (Python 3.12, manylinux x86_64) into /tmp/site,
# prints the host's facts, runs `bench/quiet_host.py --budget-s BUDGET` and leaves in
# $OUT: device_run.log (everything printed), qh/*.json (each bench's results and the
# verdicts), qh.tar.gz (the same, packed) and ps.log where asked: at most 8 files, at most one folder deep.
#
#     bench/device_run.sh                 # 420 s budget, $OUT or /tmp/device_run
#     BUDGET_S=300 QH_ARGS="--only loop,fidelity" bench/device_run.sh
#     PS_EVERY_S=10 bench/device_run.sh   # also $OUT/ps.log: the busiest processes every 10 s,
#                                         # sampled from the last core (the benches use the first ones)
#
# The host is expected to have python3 with numpy, onnx, onnxruntime, httpx, jinja2,
# uvloop, prometheus-client, tqdm and psutil (PYTHON= names another interpreter). OR-Tools
# is carried as an xz tarball of its unpacked wheel (20 MB against the wheel's 30 MB, so
# that the tree and the wheels stay under the transfer limit); its CP-SAT module also
# imports pandas, which is not carried: where pandas is missing, the schedule bench
# (CP-SAT schedules) cannot run and the budget goes to loop and fidelity.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/device_run}
PY=${PYTHON:-python3}
BUDGET=${BUDGET_S:-420}
SITE=${SITE:-/tmp/site}
mkdir -p "$OUT"
LOG="$OUT/device_run.log"

run() {
  echo "=== device_run $(date -u +%FT%TZ) in $PWD, commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
  echo "--- host"
  echo "nproc $(nproc); $(uptime)"
  lscpu 2>/dev/null | grep -E '^(Architecture|CPU\(s\)|On-line|Thread|Core|Socket|NUMA node\(s\)|Model name|CPU max MHz|L2|L3|Hypervisor)' || true
  free -g 2>/dev/null | head -2 || true
  nvidia-smi -L 2>/dev/null || echo "nvidia-smi: none"
  echo "python: $(command -v "$PY") $("$PY" -V 2>&1)"
  "$PY" - <<'EOF' || true
import importlib
for m in ("numpy", "onnx", "onnxruntime", "httpx", "jinja2", "uvloop", "prometheus_client", "tqdm", "psutil",
          "pandas", "google.protobuf", "typing_extensions", "anyio", "h11", "click"):
    try:
        mod = importlib.import_module(m)
        print(f"  host has {m} {getattr(mod, '__version__', '')}")
    except Exception as exc:  # noqa: BLE001
        print(f"  host lacks {m} ({type(exc).__name__}: {exc})")
EOF

  echo "--- install ($(ls .whl/*.whl 2>/dev/null | wc -l) wheels, $(ls .whl/*.tar.xz 2>/dev/null | wc -l) tarball(s), $(du -sh .whl | cut -f1))"
  t0=$(date +%s)
  if "$PY" -m pip --version > /dev/null 2>&1; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" .whl/*.whl \
      || { echo "device_run: pip install of .whl/*.whl failed"; return 3; }
  else  # no pip beside this python: a wheel of these (no scripts, no data) is its target's files, zipped
    echo "device_run: no pip for $PY; unpacking the wheels into $SITE"
    "$PY" -c "import sys, zipfile; [zipfile.ZipFile(w).extractall(sys.argv[1]) for w in sys.argv[2:]]" "$SITE" .whl/*.whl \
      || { echo "device_run: unpacking the wheels failed"; return 3; }
  fi
  for t in .whl/*.tar.xz; do  # an unpacked wheel, packed tighter: what pip would have put in the target
    [ -e "$t" ] || continue
    "$PY" -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2], filter='tar')" "$t" "$SITE" \
      || { echo "device_run: unpacking $t failed"; return 3; }
  done
  export PYTHONPATH="$SITE:$PWD"
  echo "installed in $(( $(date +%s) - t0 )) s into $SITE"

  echo "--- imports"
  "$PY" -c "import fastapi, uvicorn, sqlalchemy, alembic, pydantic, altair, deap, moocore, pebble, httptools, fastapi_offline; \
import api.app, planner_cli.main, solvers.ga; print('service, CLI and GA import: ok')" \
    || { echo "device_run: the service does not import; the log above says what is missing"; return 4; }
  ONLY=""
  if ! "$PY" -c "from ortools.sat.python import cp_model; import ortools; print('OR-Tools', ortools.__version__, 'CP-SAT: ok')"; then
    ONLY="--only loop,fidelity"
    echo "device_run: CP-SAT does not import (see above): the schedule bench is left out, $ONLY"
  fi
  "$PY" -m planner_cli --help > /dev/null || { echo "device_run: python -m planner_cli does not start"; return 4; }

  sampler=""
  if [ -n "${PS_EVERY_S:-}" ]; then  # what loads the host while the benches run, from a core they leave alone
    last=$(( $(nproc) - 1 ))
    ( while sleep "$PS_EVERY_S"; do echo "--- $(date -u +%T) $(cut -d' ' -f1-4 /proc/loadavg)"
        ps -eo pid,ppid,pgid,pcpu,nlwp,psr,etimes,stat,args --sort=-pcpu | head -14 | cut -c1-200; done ) > "$OUT/ps.log" 2>&1 &
    sampler=$!
    trap 'kill "$sampler" 2>/dev/null' EXIT  # never outlives this run, however it ends
    taskset -a -p -c "$last" "$sampler" > /dev/null 2>&1 || true
  fi
  echo "--- quiet_host --budget-s $BUDGET ${ONLY} ${QH_ARGS:-}"
  # shellcheck disable=SC2086  # ONLY and QH_ARGS are word lists
  PYTHONUNBUFFERED=1 timeout -k 15 $((BUDGET + 90)) "$PY" bench/quiet_host.py --budget-s "$BUDGET" \
    --out-dir "$OUT/qh" $ONLY ${QH_ARGS:-}
  rc=$?
  [ -n "$sampler" ] && kill "$sampler" 2>/dev/null
  echo "--- after (quiet_host exit $rc): $(uptime)"
  left=$(pgrep -af -- "$(command -v "$PY")" | grep -v pgrep || true)  # what this interpreter still runs
  [ -n "$left" ] && echo "processes left running:" && echo "$left"
  return $rc
}

run 2>&1 | tee "$LOG"
rc=${PIPESTATUS[0]}
tar -czf "$OUT/qh.tar.gz" -C "$OUT" device_run.log $( [ -d "$OUT/qh" ] && echo qh ) 2>/dev/null
echo "device_run: exit $rc; in $OUT: $(cd "$OUT" && find . -type f | sort | tr '\n' ' ')"
exit "$rc"
