"""Solver families. Each module exposes SOLVERS = [...]; see planner.solver."""
