"""Planner core: documents, compiled problem, evaluator, solver protocol, plans."""

__version__ = "0.1.0"
