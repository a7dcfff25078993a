"""The CPU topology a schedule's PEs share, read from /sys (Linux): which logical CPUs are
SMT siblings of one physical core, which share a cache, which share a clock (a cpufreq
policy). PEs that run at once slow each other through exactly these (an SMT sibling shares
the core's execution units, a shared L2/L3 its capacity, a policy its frequency), so the
PE profile reads them, shows them, and a schedule that puts two busy PEs on one physical
core is flagged.

Every file may be missing (a container without /sys, a VM without cpufreq, an ARM board
without cache files): each gap falls back to the safe reading (a CPU is its own core; a
cache or a clock not listed is not known to be shared) and is said in `notes`, never
guessed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

SYS_CPU = Path("/sys/devices/system/cpu")


def parse_cpu_list(text: str) -> frozenset[int]:
    """'0-3,8,10-11' -> {0, 1, 2, 3, 8, 10, 11} (the kernel's cpulist format)."""
    out: set[int] = set()
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return frozenset(out)


def _size_bytes(text: str) -> int | None:
    """'32K' / '1024K' / '32M' -> bytes."""
    t = text.strip().upper()
    if not t:
        return None
    mult = {"K": 1024, "M": 1024 ** 2, "G": 1024 ** 3}.get(t[-1], 1)
    digits = t[:-1] if t[-1] in "KMG" else t
    return int(digits) * mult if digits.isdigit() else None


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None


@dataclass(frozen=True)
class SharedCache:
    level: int
    kind: str  # Data, Instruction, Unified
    size_bytes: int | None
    cpus: frozenset[int]

    @property
    def name(self) -> str:
        return f"L{self.level}{'' if self.kind == 'Unified' else self.kind[0].lower()}"


@dataclass(frozen=True)
class CpuTopology:
    """What /sys says of `cpus`: SMT sibling sets (one per physical core), the caches
    shared by more than one of them, the cpufreq policies; `notes`: what it did not say."""

    cpus: tuple[int, ...]
    siblings: dict[int, frozenset[int]]  # cpu -> the CPUs of its physical core (itself included)
    caches: tuple[SharedCache, ...] = ()  # each distinct cache over 2+ CPUs
    freq_policies: tuple[frozenset[int], ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)

    def same_core(self, a: Iterable[int], b: Iterable[int]) -> bool:
        """Whether a CPU of set a and a CPU of set b are SMT siblings of one physical core."""
        b = frozenset(b)
        return any(self.siblings.get(x, frozenset({x})) & (b - {x}) for x in a)

    def shared(self, a: Iterable[int], b: Iterable[int]) -> list[str]:
        """What two disjoint CPU sets (two PEs) share, worst first: 'physical core' (SMT
        siblings), each shared cache ('L2', 'L3'), 'cpufreq policy' (one clock)."""
        a, b = frozenset(a), frozenset(b)
        out = ["physical core"] if self.same_core(a, b) else []
        for c in sorted(self.caches, key=lambda c: c.level):
            if c.cpus & a and c.cpus & b and c.name not in out:
                out.append(c.name)
        if any(p & a and p & b for p in self.freq_policies):
            out.append("cpufreq policy")
        return out

    def cores(self) -> list[frozenset[int]]:
        """The physical cores of `cpus`, each as its set of logical CPUs."""
        return sorted({self.siblings[c] & frozenset(self.cpus) for c in self.cpus}, key=min)

    def lines(self) -> list[str]:
        """The topology in words, for the profile's output."""
        cores = self.cores()
        smt = [c for c in cores if len(c) > 1]
        out = [f"CPUs {_fmt(self.cpus)}: {len(cores)} physical core(s)"
               + (f", SMT siblings {'; '.join(_fmt(c) for c in smt)}" if smt else ", no two of them SMT siblings")]
        for c in self.caches:
            size = f" {c.size_bytes // 1024} KiB" if c.size_bytes else ""
            out.append(f"{c.name}{size} shared by CPUs {_fmt(c.cpus)}")
        for p in self.freq_policies:
            if len(p) > 1:
                out.append(f"one clock (cpufreq policy) for CPUs {_fmt(p)}")
        return out + [f"note: {n}" for n in self.notes]

    def to_dict(self) -> dict:
        """The ExecutorRegime.topology document."""
        return {"cpus": list(self.cpus), "smt_siblings": [sorted(c) for c in self.cores() if len(c) > 1],
                "shared_caches": [{"level": c.level, "type": c.kind, "size_bytes": c.size_bytes, "cpus": sorted(c.cpus)}
                                  for c in self.caches],
                "cpufreq_policies": [sorted(p) for p in self.freq_policies], "notes": list(self.notes)}

    @classmethod
    def from_dict(cls, d: dict) -> "CpuTopology":
        cpus = tuple(int(c) for c in d.get("cpus", ()))
        siblings = {c: frozenset({c}) for c in cpus}
        for group in d.get("smt_siblings", ()):
            g = frozenset(int(x) for x in group)
            for c in g:
                siblings[c] = g
        caches = tuple(SharedCache(int(c["level"]), c["type"], c.get("size_bytes"), frozenset(c["cpus"]))
                       for c in d.get("shared_caches", ()))
        return cls(cpus, siblings, caches, tuple(frozenset(p) for p in d.get("cpufreq_policies", ())),
                   tuple(d.get("notes", ())))


def _fmt(cpus: Iterable[int]) -> str:
    return ",".join(str(c) for c in sorted(cpus))


def read_topology(cpus: Sequence[int], root: Path | str = SYS_CPU) -> CpuTopology:
    """The topology of `cpus` as /sys (under `root`) gives it, with the fallbacks above."""
    root = Path(root)
    cpus = tuple(sorted(int(c) for c in cpus))
    mine = frozenset(cpus)
    notes: list[str] = []
    siblings: dict[int, frozenset[int]] = {}
    lacking = []
    for c in cpus:
        text = _read(root / f"cpu{c}" / "topology" / "thread_siblings_list")
        if text is None:
            lacking.append(c)
            siblings[c] = frozenset({c})
        else:
            siblings[c] = parse_cpu_list(text) | {c}
    if lacking:
        notes.append(f"no SMT siblings listed for CPU(s) {_fmt(lacking)} (topology/thread_siblings_list): each taken "
                     "as its own physical core, so PEs on them are not flagged as sharing one")
    caches: dict[tuple[int, str, frozenset[int]], SharedCache] = {}
    no_cache = []
    for c in cpus:
        idx = sorted((root / f"cpu{c}" / "cache").glob("index*"))
        if not idx:
            no_cache.append(c)
        for d in idx:
            level, kind, shared = _read(d / "level"), _read(d / "type"), _read(d / "shared_cpu_list")
            if level is None or kind is None or shared is None or not level.isdigit():
                continue
            over = parse_cpu_list(shared) & mine
            if len(over) > 1:
                key = (int(level), kind, over)
                caches.setdefault(key, SharedCache(int(level), kind, _size_bytes(_read(d / "size") or ""), over))
    if no_cache:
        notes.append(f"no cache description for CPU(s) {_fmt(no_cache)} (cache/index*): shared caches unknown")
    policies: set[frozenset[int]] = set()
    for p in sorted((root / "cpufreq").glob("policy*")):
        text = _read(p / "related_cpus") or _read(p / "affected_cpus")
        if text:
            over = parse_cpu_list(text) & mine
            if over:
                policies.add(over)
    if not policies:
        for c in cpus:
            text = _read(root / f"cpu{c}" / "cpufreq" / "related_cpus")
            if text and (over := parse_cpu_list(text) & mine):
                policies.add(over)
    if not policies:
        notes.append("no cpufreq policy (a virtual machine or a fixed clock): which CPUs share a clock is unknown")
    return CpuTopology(cpus, siblings, tuple(sorted(caches.values(), key=lambda c: (c.level, c.kind, min(c.cpus)))),
                       tuple(sorted(policies, key=min)), tuple(notes))


def shared_core_pairs(topology: CpuTopology, pes: Sequence[tuple[str, Sequence[int]]]) -> list[tuple[str, str, list[str]]]:
    """Pairs of PEs (name, cores) of one schedule that share something, with what: the PEs
    run at once, so each such pair slows each other ('physical core' is the worst: two
    threads on one core's execution units)."""
    out = []
    for i, (na, ca) in enumerate(pes):
        for nb, cb in pes[i + 1:]:
            what = topology.shared(ca, cb)
            if what:
                out.append((na, nb, what))
    return out
