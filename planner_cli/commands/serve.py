"""`planner serve` runs the planning service (FastAPI on uvicorn, SQLite under the
data directory unless DATABASE_URL is set); `planner token` creates, lists and
revokes its API tokens (stored hashed; a secret is shown once)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from planner.core.errors import InputError

TOKEN_DOC = """`planner token`: create, list and revoke the service's API tokens (bearer tokens with
scopes admin, pipeline, executor; stored hashed, a secret is printed once). It reads the
database `planner serve` uses: --data-dir, else $PLANNER_DATA_DIR, else ./data (DATABASE_URL
overrides both). `planner token list`, then `planner token revoke TOKEN_ID`."""

BANNER = """
############################################################################
#  INSECURE DEV MODE: authentication is OFF. Every caller is admin.        #
#  Use only on your own machine; never expose this port to a network.      #
############################################################################
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="run the planning service (REST API, Swagger UI at /docs)", description=__doc__)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: localhost only)")
    p.add_argument("--port", type=int, default=8000, help="TCP port to listen on")
    p.add_argument("--data-dir", default=None, metavar="DIR", help="where the SQLite database lives (default: $PLANNER_DATA_DIR, else ./data)")
    p.add_argument("--insecure-dev", action="store_true", help="no authentication: every caller is admin (development only)")
    p.add_argument("--workers", type=int, default=None, metavar="N", help="solver worker processes (default 1)")
    p.add_argument("--executor", default=None, metavar="WHERE",
                   help="where solver jobs run: 'local' (worker processes) or 'dask://HOST:PORT' (a Dask scheduler; "
                        "tls://HOST:PORT with Dask's TLS settings, DASK_DISTRIBUTED__COMM__TLS__*); "
                        "default $PLANNER_EXECUTOR or local")
    p.add_argument("--replica-id", default=None, metavar="NAME",
                   help="this replica's name in job leases; a restarted replica with the same name takes its jobs back "
                        "at once (default $PLANNER_REPLICA_ID or host-pid-random)")
    p.add_argument("--admin-token-file", default=None, metavar="FILE",
                   help="where the first start of an empty store writes its admin token (mode 0600); default "
                        "$PLANNER_ADMIN_TOKEN_FILE, else DATA_DIR/admin-token with SQLite and none with DATABASE_URL "
                        "(create one with 'planner token create --scope admin')")
    p.add_argument("--no-access-log", dest="no_access_log", action="store_true", help="do not log every request")
    p.add_argument("--access-log", dest="no_access_log", action="store_false",
                   help="log every request (the default; the last of the two flags wins)")
    p.add_argument("--log-format", choices=("text", "json"), default=None,
                   help="text, or json: one JSON object per line with request id, job id, deployment and "
                        "token name where they apply, also from the worker processes (default $PLANNER_LOG_FORMAT or text)")
    p.add_argument("--drain-s", type=float, default=None, metavar="S",
                   help="on SIGTERM, running jobs may finish for this long before they are handed back to the other "
                        "replicas (default $PLANNER_DRAIN_S or 30)")
    p.add_argument("--loop", choices=("auto", "uvloop", "asyncio"), default="auto",
                   help="the event loop: auto takes uvloop where it is installed (it is, with the service), else "
                        "asyncio's own (default auto)")
    p.add_argument("--http", choices=("auto", "httptools", "h11"), default="auto",
                   help="the HTTP/1.1 parser: auto takes httptools where it is installed, else h11 (default auto)")
    p.set_defaults(func=run_serve)

    t = sub.add_parser("token", help="create, list or revoke API tokens", description=TOKEN_DOC)
    where = argparse.ArgumentParser(add_help=False)
    where.add_argument("--data-dir", default=None, metavar="DIR",
                       help="the service's data directory, as given to planner serve (default: $PLANNER_DATA_DIR, else ./data; DATABASE_URL overrides)")
    tsub = t.add_subparsers(dest="token_command", metavar="ACTION", required=True)
    c = tsub.add_parser("create", parents=[where], help="create a token and print its secret (shown once)")
    c.add_argument("--name", required=True, help="who or what uses it (e.g. ci, board-17)")
    c.add_argument("--scope", action="append", required=True, choices=("admin", "pipeline", "executor", "metrics"),
                   help="repeatable: admin, pipeline (writes profiles, plans, deployments), executor (reads its deployments' plans), "
                        "metrics (reads /metrics: a Prometheus scraper)")
    c.add_argument("--deployment", action="append", default=[], metavar="ID_OR_NAME",
                   help="repeatable: deployment an executor token may read (bound to its id; the deployment must exist)")
    c.set_defaults(func=run_token_create)
    ls = tsub.add_parser("list", parents=[where], help="list tokens (never their secrets)")
    ls.set_defaults(func=run_token_list)
    r = tsub.add_parser("revoke", parents=[where], help="revoke a token by id")
    r.add_argument("token_id", help="the id `planner token list` shows (tok_...), not the secret")
    r.set_defaults(func=run_token_revoke)


def _settings(args: argparse.Namespace, **extra):
    from api.settings import Settings

    return Settings.from_env(data_dir=Path(args.data_dir) if args.data_dir else None, **extra)


def _db(args: argparse.Namespace):
    """The database `planner serve` uses (same flags, same environment, same default).
    A token command never creates one: a token in a fresh ./data of the wrong folder
    would leave the server answering 401."""
    from api.db import Database

    settings = _settings(args)
    if not settings.database_url:
        path = Path(settings.data_dir).resolve() / "planner.sqlite"
        if not path.exists():
            raise InputError("--data-dir", f"no service database at {path}: start the service once (make run / "
                             "planner serve), or name its data directory with --data-dir DIR or PLANNER_DATA_DIR")
    return Database(settings.url)


def run_serve(args: argparse.Namespace) -> int:
    import logging

    import uvicorn

    from api.app import create_app

    if not 0 < args.port < 65536:
        raise InputError("--port", f"{args.port} is not a TCP port")
    if args.workers is not None and args.workers < 1:
        raise InputError("--workers", "needs at least 1 worker process")
    if args.executor is not None and args.executor != "local" and not args.executor.startswith(("dask://", "tls://")):
        raise InputError("--executor", f"'{args.executor}' is neither 'local' nor 'dask://HOST:PORT'")
    if args.drain_s is not None and not args.drain_s >= 0:
        raise InputError("--drain-s", f"must be >= 0 seconds, got {args.drain_s:g}")
    import importlib.util

    for flag, module in (("--loop", "uvloop"), ("--http", "httptools")):
        if getattr(args, flag[2:]) == module and importlib.util.find_spec(module) is None:
            raise InputError(flag, f"{module} is not installed here; use auto")
    from api import logs

    fmt = args.log_format or os.environ.get(logs.ENV) or "text"
    if fmt not in logs.FORMATS:
        raise InputError("PLANNER_LOG_FORMAT", f"must be one of {', '.join(logs.FORMATS)}, got '{fmt}'")
    os.environ[logs.ENV] = fmt  # the plan and job worker processes this service spawns log the same way
    json_logs = fmt == "json"
    sock = listen(args.host, args.port)  # before anything is created: a busy port leaves no data dir, no token
    settings = _settings(args, insecure_dev=args.insecure_dev or None, workers=args.workers, executor=args.executor,
                         replica_id=args.replica_id, drain_s=args.drain_s,
                         access_log=not args.no_access_log,
                         admin_token_file=Path(args.admin_token_file) if args.admin_token_file else None)
    logs.configure(fmt, replica=settings.replica_id)
    logging.getLogger("alembic").setLevel(logging.WARNING)
    if settings.insecure_dev and not json_logs:  # JSON mode: the app's warning line says it (api.app)
        print(BANNER, file=sys.stderr, flush=True)
    where = settings.database_url and "DATABASE_URL" or str(Path(settings.data_dir).resolve())
    if not settings.insecure_dev:
        first_admin(settings, show_secret=not json_logs)
    serving = (f"serving on http://{args.host}:{args.port} (docs at /docs), data in {where}, jobs run "
               f"{'in local worker processes' if settings.executor == 'local' else 'on ' + settings.executor}")
    if json_logs:
        logging.getLogger("planner").info(serving)
    else:
        print(f"planner: {serving}", file=sys.stderr, flush=True)
    app = create_app(settings)
    from api import http_limits

    # the access line is the app's (api.metrics.OpsMiddleware): secrets masked in every field, probes left out
    config = uvicorn.Config(app, host=args.host, port=args.port, loop=args.loop, http=http_limits.protocol(args.http),
                            h11_max_incomplete_event_size=http_limits.MAX_HEAD_BYTES, access_log=False,
                            timeout_graceful_shutdown=5, log_level="info",
                            log_config=logs.uvicorn_log_config() if json_logs else _timestamped(uvicorn.config.LOGGING_CONFIG))
    try:
        _draining_server()(config).run(sockets=[sock])
    except KeyboardInterrupt:  # uvicorn re-raises the SIGINT it shut down for
        if not json_logs:
            raise
        logging.getLogger("planner").info("stopped (SIGINT)")
        return 130
    return 0


def listen(host: str, port: int):  # noqa: ANN201
    """The listening socket, bound now (uvicorn serves on it), so that a port in use is
    a one-line error before the service touches its data directory."""
    import socket

    try:
        family, kind, proto, _, addr = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        raise InputError("--host", f"cannot listen on {host}: {exc}") from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(addr)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        why = "is in use (another planner serve? pick another with --port or PORT=)" if exc.errno == 98 else f": {exc.strerror}"
        raise InputError("--port", f"{host}:{port} {why}") from None
    sock.set_inheritable(True)
    return sock


def _timestamped(config: dict) -> dict:
    """uvicorn's log configuration with the time in front of every line (an operator
    matching a log to an outage needs it)."""
    import copy

    config = copy.deepcopy(config)
    for formatter in config.get("formatters", {}).values():
        if "fmt" in formatter:
            formatter["fmt"] = "%(asctime)s " + formatter["fmt"]
    return config


def _draining_server():  # noqa: ANN202
    import signal

    import uvicorn

    import threading

    class DrainingServer(uvicorn.Server):
        """SIGTERM starts the service's drain (no new jobs; /v1/ready and new work 503)
        while the replica keeps listening: running jobs finish (PLANNER_DRAIN_S), the
        balancer sees the 503 (PLANNER_DRAIN_LISTEN_S), open long-polls are answered
        (Service.drained); only then does uvicorn stop accepting connections and finish
        the requests in flight. The lifespan's shutdown hands back what still runs. A
        second SIGTERM, or SIGINT, stops at once."""

        draining = False

        def handle_exit(self, sig: int, frame) -> None:  # noqa: ANN001
            if sig == signal.SIGTERM and not self.draining:
                self.draining = True
                svc = self.config.app.state.service
                svc.begin_drain()

                def then_close() -> None:
                    try:
                        svc.drained()
                    finally:
                        uvicorn.Server.handle_exit(self, sig, frame)

                threading.Thread(target=then_close, name="drain-listen", daemon=True).start()
                return
            super().handle_exit(sig, frame)

    return DrainingServer


def first_admin(settings, show_secret: bool = True) -> None:  # noqa: ANN001
    """First run: an empty store gets an admin token, printed once with where it is kept
    (JSON log mode: only where it is kept, so no log pipeline ever receives it); with
    DATABASE_URL and no admin token file configured, none: the operator makes one."""
    from api.auth import ensure_first_admin, has_tokens
    from api.db import Database

    db = Database(settings.url)
    try:
        path = settings.first_admin_file
        if path is None:
            if not has_tokens(db):
                note = ("the database has no API token yet: create one with 'planner token create --name admin "
                        "--scope admin' (it reads DATABASE_URL), or set PLANNER_ADMIN_TOKEN_FILE=FILE (outside any source "
                        "tree) for the first start to write one there")
                if show_secret:
                    print(f"planner: {note}", file=sys.stderr, flush=True)
                else:  # JSON log mode: JSON lines only
                    from api.logs import json_line

                    print(json_line("planner", note, level="warning"), file=sys.stderr, flush=True)
            return
        made = ensure_first_admin(db, path)
    finally:
        db.dispose()
    if made is None:
        return
    token_id, secret, path = made
    if not show_secret:
        from api.logs import json_line

        print(json_line("planner", f"first run: created admin token {token_id}; its secret is in {path} (mode 0600), "
                        "not in the log", level="warning"), file=sys.stderr, flush=True)
        return
    data = "" if Path(settings.data_dir).resolve() == Path("data").resolve() else f" --data-dir {Path(settings.data_dir).resolve()}"
    print(f"planner: first run: created admin token {token_id}; its secret (shown this once, also in {path}, mode 0600):\n"
          f"\n    {secret}\n\n"
          f"planner: use it as 'Authorization: Bearer <secret>' (export PLANNER_TOKEN=$(cat {path})); make narrower tokens "
          f"with 'planner token create{data} --name ci --scope pipeline', then delete {path}",
          file=sys.stderr, flush=True)


def run_token_create(args: argparse.Namespace) -> int:
    from api.auth import create_token

    try:
        token_id, secret = create_token(_db(args), args.name, args.scope, args.deployment)
    except ValueError as exc:
        raise InputError("--deployment" if "no deployment" in str(exc) else "--scope", str(exc)) from None
    print(f"created token {token_id} ({','.join(sorted(set(args.scope)))}) for '{args.name}'; its secret is shown once:",
          file=sys.stderr)
    print(secret)
    return 0


def run_token_list(args: argparse.Namespace) -> int:
    from api.auth import list_tokens

    for t in list_tokens(_db(args)):
        state = f"revoked {t.revoked_at:%Y-%m-%d %H:%M}" if t.revoked_at else "active"
        bound = f" deployments={','.join(t.deployments)}" if t.deployments else ""
        print(f"{t.id}  {t.name:<20} {','.join(t.scopes):<18} {state}  created {t.created_at:%Y-%m-%d %H:%M}{bound}")
    return 0


def run_token_revoke(args: argparse.Namespace) -> int:
    from api.auth import revoke_token

    if not revoke_token(_db(args), args.token_id):
        raise InputError("token_id", f"no active token '{args.token_id}'")
    print(f"revoked {args.token_id}")
    return 0
