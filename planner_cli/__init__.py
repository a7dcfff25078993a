"""The `planner` command line: the top floor, argparse shells over the planner, the
executor and the service (ARCHITECTURE.md). Nothing in `planner/` imports it."""
