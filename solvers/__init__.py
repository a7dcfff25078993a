"""Solver families. Each module exposes SOLVERS = [...]; see planner.core.solver (protocol) and planner.registry."""
