"""The UI's frontier (/ui/frontier) in a process of its own, apart from api.routers.ui: a
spawned process imports the module of the function it runs, and the router's imports
(FastAPI, templates, the whole service) cost it about a second before any work; this
module imports only what the frontier needs."""

from __future__ import annotations

import multiprocessing

from pebble import concurrent


class FrontierTooLarge(Exception):
    """Layers x targets over the UI's limit, found where the documents are parsed."""

    def __init__(self, layers: int, targets: int):
        super().__init__(layers, targets)
        self.layers, self.targets = layers, targets


@concurrent.process(context=multiprocessing.get_context("spawn"))  # pebble reads context: mp_context was ignored
def frontier_process(platform_id: str, profile_id: str, k: int, devices: list[str] | None,
                     parent_pid: int | None = None, memory_mb: int | None = None, url: str = "",
                     max_cells: int | None = None) -> dict:
    """The frontier, cancelled (killed) at the UI's timeout: its size (and time) grows with
    layers and transitions; spawned, as the server is multi-threaded. It dies with the
    server and is held to the job workers' memory cap. It reads and parses the documents
    itself: in the service's process their parse (and re-serialisation to send them here)
    held the GIL, stalling the event loop (issue 21)."""
    from sqlalchemy import select

    from api.db import Database
    from api.job_types import cap_memory
    from api.rows import DocumentRow
    from api.worker import lower_priority
    from planner.core.errors import InputError, Issue
    from planner.core.procs import die_with_parent
    from planner.core.schema import ModelProfile, Platform
    from planner.frontier import frontier_report

    die_with_parent(parent_pid)
    lower_priority()
    cap_memory(memory_mb)
    db = Database(url, run_migrations=False)
    try:
        with db.session() as s:
            bodies = dict(s.execute(select(DocumentRow.kind, DocumentRow.body).where(
                DocumentRow.id.in_((platform_id, profile_id)), DocumentRow.kind.in_(("platform", "profile")))).all())
    finally:
        db.dispose()
    if set(bodies) != {"platform", "profile"}:
        missing = "platform" if "platform" not in bodies else "profile"
        raise InputError([Issue(f"{missing}_id", f"no {missing} with this id")])
    platform, profile = Platform.model_validate_json(bodies["platform"]), ModelProfile.model_validate_json(bodies["profile"])
    targets = sum(len(d.dvfs_levels) for d in platform.devices)
    if max_cells is not None and len(profile.layers) * targets > max_cells:
        raise FrontierTooLarge(len(profile.layers), targets)
    return frontier_report(platform, profile, max_transitions=k, devices=devices).as_dict()
