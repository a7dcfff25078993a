"""`planner` command line. Subcommands live in planner_cli/commands/<name>.py, each with
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


class TopFormatter(argparse.RawDescriptionHelpFormatter, DefaultsFormatter):
    """`planner --help`: the command list (its epilog) laid out as written."""


class OneLineParser(argparse.ArgumentParser):
    """Usage errors in one line too (argparse prints the whole usage by default); help
    shows every option's default (subcommands are built with this class too)."""

    def __init__(self, *args, **kwargs):
        if kwargs.get("formatter_class", None) in (None, argparse.ArgumentDefaultsHelpFormatter):
            kwargs["formatter_class"] = DefaultsFormatter  # argparse's own prints "(default: None)"
        super().__init__(*args, **kwargs)

    def error(self, message: str):  # type: ignore[override]
        self.exit(EXIT_INPUT, f"{self.prog}: error: {with_nearest(message)} (see {self.prog} --help)\n")


def with_nearest(message: str) -> str:
    """argparse's "invalid choice: 'solv' (choose from ...)" with the nearest choice
    named (a command, an objective, any option with choices)."""
    import re

    from planner.core.names import did_you_mean

    m = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)$", message)
    if not m:
        return message
    hint = did_you_mean(m.group(1), re.findall(r"'([^']*)'", m.group(2)))
    at = m.start(2) - len("choose from ")
    return f"{message[:at]}{hint}{message[at:]}" if hint else message


def build_parser() -> argparse.ArgumentParser:
    import planner_cli.commands as commands

    parser = OneLineParser(
        prog="planner", formatter_class=TopFormatter,
        description="Plan DNN inference on heterogeneous SoCs: slicing, device and frequency per slice.",
    )
    parser.add_argument("--version", action="version", version=f"planner {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineParser)
    for mod in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        if not mod.name.startswith("_"):
            importlib.import_module(f"planner_cli.commands.{mod.name}").register(sub)
    parser.set_defaults(_commands=sub.choices)
    describe(sub)
    order_by_task(parser, sub)
    return parser


# The command list, by what a person is doing; a command not named here is listed last.
TASKS = (
    ("plan on this machine", ("solve", "frontier", "schedule", "validate", "solvers", "plot", "schema")),
    ("measure and run on a board", ("profile", "import", "execute", "agent", "refit")),
    ("serve and deploy", ("serve", "token", "upload", "plan", "deploy", "bundle")),
)


def describe(sub: argparse._SubParsersAction) -> None:
    """A command registered with a one-line `help` and no description shows that line
    as its description in its own --help (nested commands too: `token create`)."""
    for action in sub._choices_actions:
        p = sub.choices[action.dest]
        if not p.description and action.help:
            p.description = action.help[0].upper() + action.help[1:] + "."
        for inner in p._actions:
            if isinstance(inner, argparse._SubParsersAction):
                describe(inner)


def order_by_task(parser: argparse.ArgumentParser, sub: argparse._SubParsersAction) -> None:
    """`planner --help` lists the commands grouped by task, a heading per group (argparse
    lists them in registration order, which is the modules' alphabetical order)."""
    helps = {a.dest: a.help or "" for a in sub._choices_actions}
    width = max(len(n) for n in helps) + 2
    lines = ["commands, by task (planner COMMAND --help for each):"]
    groups = [*TASKS, ("other", tuple(n for n in helps if not any(n in names for _, names in TASKS)))]
    for title, names in groups:
        present = [n for n in names if n in helps]
        if present:
            lines.append(f"  {title}:")
            lines += [f"    {n:<{width}}{helps[n]}" for n in present]
    parser.epilog = "\n".join(lines)
    parser.usage = f"{parser.prog} [-h] [--version] COMMAND ..."
    sub.help = argparse.SUPPRESS


def unknown_options(parser: argparse.ArgumentParser, args: argparse.Namespace, extra: list[str]) -> None:
    """Refuse arguments the command does not take, in the command's own words: its
    --help, the option it probably meant, and the commands that do take it (an
    `--energy-cap` given to `frontier` belongs to `plot`)."""
    import difflib

    commands = getattr(args, "_commands", {}) or {}
    own = commands.get(getattr(args, "command", None)) or parser
    hints = []
    for arg in extra:
        name = arg.split("=", 1)[0]
        if not name.startswith("--"):
            continue
        close = difflib.get_close_matches(name, list(own._option_string_actions), n=1, cutoff=0.75)
        others = sorted(c for c, p in commands.items() if p is not own and name in p._option_string_actions)
        if close:
            hints.append(f"did you mean {close[0]}?")
        if others:
            hints.append(f"{name} is an option of `planner {' / '.join(others)}`")
    own.error(f"unrecognized arguments: {' '.join(extra)}" + (f" ({'; '.join(hints)})" if hints else ""))


def _error_printer(args: argparse.Namespace):  # noqa: ANN202
    """How a command's last line is printed: one plain line, or under a JSON log format
    (`serve`, `agent`: --log-format json or PLANNER_LOG_FORMAT=json) one JSON log line, so a
    log pipeline that parses JSON never meets a line it cannot read."""
    if hasattr(args, "log_format") and (args.log_format or os.environ.get("PLANNER_LOG_FORMAT")) == "json":
        def as_json(msg: str) -> None:
            from api.logs import json_line

            print(json_line("planner", msg.removeprefix("planner: "), level="error"), file=sys.stderr, flush=True)
        return as_json
    return lambda msg: print(msg, file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:
        unknown_options(parser, args, extra)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_INPUT
    print_error = _error_printer(args)
    try:
        return int(args.func(args) or 0)
    except PlannerError as exc:
        print_error(f"planner: error: {exc.text()}")
        return EXIT_INFEASIBLE if exc.status in ("infeasible", "not_found") else EXIT_INPUT
    except KeyboardInterrupt:
        print_error("planner: interrupted")
        return 130
    except BrokenPipeError:
        return 0
    except ModuleNotFoundError as exc:
        extra = EXTRAS.get((exc.name or "").split(".")[0])
        if extra is None or os.environ.get("PLANNER_DEBUG"):
            raise
        print_error(f"planner: error: {args.command} needs {exc.name}, not installed here (a board install?): "
                    f"pip install 'hetero-planner[{extra}]'")
        return EXIT_INPUT
    except Exception as exc:  # noqa: BLE001 - the CLI never shows a traceback unless asked
        if os.environ.get("PLANNER_DEBUG"):
            raise
        first = (str(exc).strip().splitlines() or [""])[0]
        print_error(f"planner: internal error: {type(exc).__name__}: {first} (PLANNER_DEBUG=1 for details)")
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
