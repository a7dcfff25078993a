"""Verification on the board (issue 20): a plan activated with `verify` is measured where
it runs before it is served. The service prepares the candidates (the plan, its K
next-best, each device alone: planner.verify.prepare) with the revision that activates
the plan; the board's answer to GET .../plan carries them; the agent measures them end to
end in the profile's regime and posts its figures; the service concludes as `planner
solve --verify` does (planner.verify.conclude) and activates the verified plan, with its
`verification`, as the next revision. The measured plan is what the board then serves.

The order is prepared by a plan worker process (`order`, called by
api/fastplans.Planner.handle_verify under the worker's deadline and memory cap): the
k-best DP over a large profile holds the GIL for long, which on a thread of the service
stalled its event loop; the service stores the answer with the revision.

Kept apart from api/service.py: this is the only place that reads or writes the
verifications table.
"""

from __future__ import annotations

import json

from sqlalchemy import select

from api.auth import Principal
from starlette.concurrency import run_in_threadpool

from api.contexts import ServiceContext, WorkerContext
from api.problems import ApiError, Issue, TooSlow, from_planner_error, invalid
from api.rows import DeploymentRow, PlanRow, VerificationRow, utcnow
from planner.core.errors import PlannerError
from planner.core.problem import Assignment
from planner.core.schema import ModelProfile, Plan, PlanRequest, Platform
from planner.core.telemetry import MAX_VERIFY_S, VerificationReport, VerifyOnDevice, verify_seconds


PENDING, VERIFIED, SKIPPED = "pending", "verified", "skipped"


def _inputs(planner: WorkerContext, plan_id: str) -> tuple[PlanRow, Platform, ModelProfile, PlanRequest, Plan]:
    with planner.db.session() as s:
        row = s.get(PlanRow, plan_id)
        if row is None:
            raise invalid("plan_id", f"no plan with id {plan_id}")
        body = row.body
    platform = planner.parsed("platform", row.platform_id, "plan_id")
    profile = planner.parsed("profile", row.profile_id, "plan_id")
    return row, platform, profile, PlanRequest.model_validate_json(row.request), Plan.model_validate_json(body)


def order(planner: WorkerContext, plan_id: str, verify: VerifyOnDevice) -> str:
    """The order a board measures (AgentVerifyOrder) with each candidate's targets, as
    JSON; 422 (field `verify` or the reason's own) when the plan cannot be verified.
    Run by a plan worker (see the module's docstring), or in process by Service.activate."""
    from planner.verify import prepare

    _, platform, profile, request, plan = _inputs(planner, plan_id)
    try:
        prep = prepare(platform, profile, request, verify.candidates, plan)
    except PlannerError as exc:  # the plan's own request is why: named under `verify`, the field asked
        raise invalid("verify", f"this plan cannot be verified: {exc.one_line()}") from None
    slices = prep.slices()
    ids = [layer.id for layer in profile.layers]
    regime = prep.regime
    need_s = verify_seconds(verify.runs, [c.predicted_ms for c in prep.candidates], regime.mode, regime.rate_hz,
                            regime.settle)
    if need_s > MAX_VERIFY_S:  # bounded where it is accepted: a board would hold its cores that long
        rate = f" at the profile's {regime.rate_hz:g} Hz" if regime.mode == "rate" and regime.rate_hz else ""
        raise invalid("verify.runs", f"{len(prep.candidates)} candidates x {verify.runs} runs{rate} take at least "
                                     f"{need_s:.0f} s on the board, over the {MAX_VERIFY_S:g} s a verification may "
                                     "hold it; ask fewer runs or candidates")
    return json.dumps({
        "runs": verify.runs, "statistic": "median",
        "regime": {"mode": regime.mode, "rate_hz": regime.rate_hz, "settle": regime.settle, "pool": regime.pool,
                   "clock": regime.clock},
        "candidates": [{"name": c.name, "notation": _notation(prep, c), "predicted_ms": c.predicted_ms,
                        "slices": [{"index": i, "first_index": a, "last_index": b, "device": dev,
                                    "first_layer": ids[a], "last_layer": ids[b]}
                                   for i, (a, b, dev) in enumerate(slices[c.name])],
                        "targets": list(c.assignment.targets), "starts": list(c.assignment.starts)}
                       for c in prep.candidates],
    })


def _notation(prep, c) -> str:  # noqa: ANN001
    from planner.plan import notation

    return notation(prep.view, c.assignment, with_freq=False)


def pending_order(svc: ServiceContext, dep_id: str, revision: int) -> dict | None:
    """The order of the revision's pending verification, as the board reads it (no
    targets), or None."""
    with svc.db.session() as s:
        row = s.scalars(select(VerificationRow).where(VerificationRow.deployment_id == dep_id,
                                                      VerificationRow.revision == revision,
                                                      VerificationRow.state == PENDING)).first()
    if row is None:
        return None
    doc = json.loads(row.order_json)
    for c in doc["candidates"]:
        c.pop("targets", None)
        c.pop("starts", None)
    return doc


def row_view(row: VerificationRow) -> dict:
    order_doc = json.loads(row.order_json)
    return {"deployment_id": row.deployment_id, "revision": row.revision, "plan_id": row.plan_id, "state": row.state,
            "runs": order_doc["runs"], "candidates": [{k: c[k] for k in ("name", "notation", "predicted_ms")}
                                                      for c in order_doc["candidates"]],
            "report": json.loads(row.result_json) if row.result_json else None,
            "verified_plan_id": row.verified_plan_id, "note": row.note,
            "created_at": row.created_at, "updated_at": row.updated_at}


def page_rows(svc: ServiceContext, dep_id: str) -> list[dict]:
    """Every verification of a deployment for its UI page, newest first: state, note and
    each candidate's predicted and measured (the board's median) latency, and which one
    was kept (the verified plan's notation; bounded: the order's candidates)."""
    with svc.db.session() as s:
        rows = list(s.scalars(select(VerificationRow).where(VerificationRow.deployment_id == dep_id)
                              .order_by(VerificationRow.revision.desc()).limit(20)))
        kept = dict(s.execute(select(PlanRow.id, PlanRow.notation).where(
            PlanRow.id.in_({r.verified_plan_id for r in rows if r.verified_plan_id}))).all())
    out = []
    for r in rows:
        order_doc = json.loads(r.order_json)
        measured = (json.loads(r.result_json).get("measured") or {}) if r.result_json else {}
        out.append({"revision": r.revision, "state": r.state, "runs": order_doc["runs"], "note": r.note,
                    "plan_id": r.plan_id, "verified_plan_id": r.verified_plan_id,
                    "candidates": [{"name": c["name"], "notation": c["notation"], "predicted_ms": c["predicted_ms"],
                                    "measured_ms": (measured.get(c["name"]) or {}).get("median_ms"),
                                    "kept": kept.get(r.verified_plan_id) == c["notation"]}
                                   for c in order_doc["candidates"]]})
    return out


def latest(svc: ServiceContext, dep_id: str, revision: int | None) -> VerificationRow:
    with svc.db.session() as s:
        q = select(VerificationRow).where(VerificationRow.deployment_id == dep_id)
        if revision is not None:
            q = q.where(VerificationRow.revision == revision)
        row = s.scalars(q.order_by(VerificationRow.revision.desc())).first()
    if row is None:
        raise ApiError(404, "no verification for this deployment" + (f" at revision {revision}" if revision else ""))
    return row


def _checked(svc: ServiceContext, dep: DeploymentRow, rep: VerificationReport) -> tuple[VerificationRow, dict]:
    """(the pending verification, its order) for the board's answer: 409 when the revision
    has no pending verification; 422 naming the candidate when the figures do not match."""
    row = latest(svc, dep.id, rep.revision)
    if row.state != PENDING:
        raise ApiError(409, f"revision {rep.revision}'s verification is already {row.state}",
                       errors=[Issue("revision", f"already {row.state}")])
    if rep.plan_id != row.plan_id:
        raise invalid("plan_id", f"revision {rep.revision} is plan {row.plan_id}, not {rep.plan_id}")
    order_doc = json.loads(row.order_json)
    if rep.skipped is None:
        names = [c["name"] for c in order_doc["candidates"]]
        problems = [Issue(f"measured.{n}", "no figures for this candidate") for n in names if n not in rep.measured]
        problems += [Issue(f"measured.{n}", "not a candidate of this verification") for n in rep.measured if n not in names]
        # at least the rounds asked (paired across candidates by round); the harness times a
        # candidate whose worker processes disagree in more rounds, so more is an answer too
        problems += [Issue(f"measured.{n}.samples_ms", f"{len(t.samples_ms)} samples; the order asked for "
                           f"{order_doc['runs']} or more (or none)")
                     for n, t in rep.measured.items() if t.samples_ms and len(t.samples_ms) < order_doc["runs"]]
        if problems:
            raise ApiError(422, f"{problems[0].path}: {problems[0].reason}", errors=problems[:20])
    return row, order_doc


def conclusion(planner: WorkerContext, plan_id: str, order_json: str, measured_json: str,
               where: str) -> tuple[str, str, dict]:
    """The verified Plan of a board's figures (the measured best, guarded by the sign test as
    planner solve --verify is) as (its JSON, its verification note, its row's columns): what
    the service stores and says without parsing the plan again. It compiles the profile: a
    plan worker runs it (api.pages.CALLS), as on a thread of the service a large profile
    stalled the loop."""
    from api.jobs import plan_columns

    from planner.plan import problem_for, select_view
    from planner.registry import get_solver
    from planner.verify import Candidate, Prepared, conclude

    order_doc = json.loads(order_json)
    _, platform, profile, request, plan = _inputs(planner, plan_id)
    try:
        view = select_view(problem_for(get_solver(request.solver), platform, profile, request), request)
        cands = [Candidate(c["name"], Assignment(tuple(c["targets"]), tuple(c["starts"])), c["predicted_ms"])
                 for c in order_doc["candidates"]]
        prep = Prepared(plan, view, cands, profile.regime or _regime(order_doc))
        verified = conclude(platform, profile, request, prep, json.loads(measured_json), order_doc["runs"], where=where)
    except PlannerError as exc:
        raise from_planner_error(exc) from None
    return verified.model_dump_json(), verified.verification.note, plan_columns(verified)


async def report(svc: ServiceContext, dep: DeploymentRow, rep: VerificationReport, who: Principal) -> VerificationRow:
    """Store the board's answer. With figures: conclude (on a plan worker: conclusion),
    store the verified plan and activate it as the next revision, unless the deployment
    has moved on meanwhile (then the figures are kept and nothing is activated). 409 when
    the revision has no pending verification; 422 naming the candidate when the figures
    do not match the order."""
    row, order_doc = await run_in_threadpool(_checked, svc, dep, rep)
    note, verified = f"the board did not measure: {rep.skipped}", None
    if rep.skipped is None:
        measured = json.dumps({n: t.model_dump() for n, t in rep.measured.items()})
        try:
            plan_json, note, columns = await svc.plan_workers.call(
                "verify-conclusion", row.plan_id, row.order_json, measured,
                f" (measured on the board by '{rep.agent or who.name}')")
        except TooSlow as exc:
            raise ApiError(503, f"concluding the verification took too long ({exc}); post the figures again",
                           errors=[Issue("<service>", "plan worker deadline")], headers={"Retry-After": "1"}) from None
        verified = (plan_json, columns)
    return await run_in_threadpool(_record, svc, dep, rep, row, verified, note)


def _record(svc: ServiceContext, dep: DeploymentRow, rep: VerificationReport, row: VerificationRow,
            verified: tuple[str, dict] | None, note: str) -> VerificationRow:
    """`verified`: the verified plan's JSON and its row's columns (conclusion)."""
    verified_plan_id = _store_plan(svc, row, *verified) if verified is not None else None
    state = VERIFIED if verified is not None else SKIPPED
    with svc.db.session() as s:
        current = s.get(VerificationRow, row.id)
        if current.state != PENDING:  # another answer won the race
            raise ApiError(409, f"revision {rep.revision}'s verification is already {current.state}",
                           errors=[Issue("revision", f"already {current.state}")])
        current.state, current.note, current.updated_at = state, note, utcnow()
        current.result_json, current.verified_plan_id = rep.model_dump_json(), verified_plan_id
    if verified_plan_id is not None:
        svc.set_active(dep, verified_plan_id, "verify", f"verification of revision {rep.revision}",
                        expect_revision=rep.revision)
    return latest(svc, dep.id, rep.revision)


def _regime(order_doc: dict):  # noqa: ANN202
    from planner.core.schema import MeasurementRegime

    r = order_doc["regime"]
    return MeasurementRegime(mode=r["mode"], rate_hz=r["rate_hz"], settle=r["settle"], pool=r["pool"], clock=r["clock"])


def _store_plan(svc: ServiceContext, row: VerificationRow, plan_json: str, columns: dict) -> str:
    from api.jobs import new_id, plan_row

    with svc.db.session() as s:
        src = s.get(PlanRow, row.plan_id)
        plan_id = new_id("pln")
        s.add(plan_row(plan_id, plan_json, src.request, src.platform_id, src.profile_id, None, columns=columns))
    return plan_id
