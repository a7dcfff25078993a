"""Run the `planner` CLI in-process and capture what it printed."""

from __future__ import annotations

from planner_cli.main import main


def run(capsys, *argv: str) -> tuple[int, str, str]:  # noqa: ANN001
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err
