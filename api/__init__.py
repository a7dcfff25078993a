"""The planning service: FastAPI app, storage (SQLAlchemy + alembic), solver jobs in
worker processes, deployments that on-device executors pull. An adapter around the
planning core: it parses, calls `planner.plan.make_plan`, stores and serialises."""
