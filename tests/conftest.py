"""The whole test suite: the measurement harness's warm-ups are bounded at 0.3 s a worker
(default 2 s) and each configuration gets one worker process (default 3, taking the rounds
in turn) so the many tests that profile or verify a model stay quick; the harness's rules
are tested in tests/test_harness.py, and the benches keep the defaults."""

import os

os.environ.setdefault("PLANNER_HARNESS_WARMUP_MAX_S", "0.3")
os.environ.setdefault("PLANNER_HARNESS_REPLICAS", "1")
