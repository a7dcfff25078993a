"""`planner` command line. Subcommands live in planner/commands/<name>.py, each with
`register(subparsers)` setting `func(args) -> int`; they are discovered, so a new
command touches no shared file. Errors are one line on stderr, never a traceback
(PLANNER_DEBUG=1 shows it)."""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sys

from planner import __version__
from planner.core.errors import PlannerError

EXIT_INPUT = 2
EXIT_INFEASIBLE = 3
EXIT_INTERNAL = 1
# optional packages (pyproject extras) -> the extra that brings them: a board installs
# only `[board]`, and a planning command run there says what to install
EXTRAS = {**dict.fromkeys(("z3", "ortools", "pulp", "deap", "moocore", "pebble"), "solvers"),
          **dict.fromkeys(("fastapi", "fastapi_offline", "uvicorn", "sqlalchemy", "alembic", "altair", "vl_convert",
                           "jinja2", "itsdangerous", "multipart", "starlette"), "service"),
          "openvino": "openvino", "onnx": "board", "onnxruntime": "board"}


class DefaultsFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Every option's help ends with its default, unless it has none (None, off, empty)
    or the help already states it."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        d = action.default
        if "default" in text or d is None or d is False or d == [] or d == argparse.SUPPRESS or not action.option_strings:
            return text
        return f"{text} (default: %(default)s)"


class OneLineParser(argparse.ArgumentParser):
    """Usage errors in one line too (argparse prints the whole usage by default); help
    shows every option's default (subcommands are built with this class too)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", DefaultsFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str):  # type: ignore[override]
        self.exit(EXIT_INPUT, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    import planner.commands as commands

    parser = OneLineParser(
        prog="planner",
        description="Plan DNN inference on heterogeneous SoCs: slicing, device and frequency per slice.",
    )
    parser.add_argument("--version", action="version", version=f"planner {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineParser)
    for mod in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        if not mod.name.startswith("_"):
            importlib.import_module(f"planner.commands.{mod.name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_INPUT
    try:
        return int(args.func(args) or 0)
    except PlannerError as exc:
        print(f"planner: error: {exc.one_line()}", file=sys.stderr)
        return EXIT_INFEASIBLE if exc.status in ("infeasible", "not_found") else EXIT_INPUT
    except KeyboardInterrupt:
        print("planner: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except ModuleNotFoundError as exc:
        extra = EXTRAS.get((exc.name or "").split(".")[0])
        if extra is None or os.environ.get("PLANNER_DEBUG"):
            raise
        print(f"planner: error: {args.command} needs {exc.name}, not installed here (a board install?): "
              f"pip install 'hetero-planner[{extra}]'", file=sys.stderr)
        return EXIT_INPUT
    except Exception as exc:  # noqa: BLE001 - the CLI never shows a traceback unless asked
        if os.environ.get("PLANNER_DEBUG"):
            raise
        first = (str(exc).strip().splitlines() or [""])[0]
        print(f"planner: internal error: {type(exc).__name__}: {first} (PLANNER_DEBUG=1 for details)", file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
