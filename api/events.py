"""Wake-ups between the service's replicas. Handlers subscribe to a channel
("deployments": a deployment's id; "jobs": a new job or "cancel:<job id>").
`LocalBus` calls them in this process (SQLite: one replica per database);
`PostgresBus` also sends every message through PostgreSQL's NOTIFY and LISTENs on a
connection of its own, so a change made on one replica wakes the long-polls and job
claimers of every replica. NOTIFY is only a wake-up: everything it says is read again
from the database, so a lost message (a PostgreSQL restart) costs a poll interval,
never correctness."""

from __future__ import annotations

import logging
import threading
from collections import defaultdict
from typing import Callable

log = logging.getLogger("planner.events")
Handler = Callable[[str | None], None]  # payload; None = "anything may have changed" (after a reconnect)
PREFIX = "planner_"


class LocalBus:
    def __init__(self) -> None:
        self._handlers: dict[str, list[Handler]] = defaultdict(list)

    def subscribe(self, channel: str, handler: Handler) -> None:
        self._handlers[channel].append(handler)

    def _dispatch(self, channel: str, payload: str | None) -> None:
        for handler in list(self._handlers.get(channel, ())):
            try:
                handler(payload)
            except Exception:  # noqa: BLE001 - one bad handler must not silence the others
                log.exception("handler of %s failed", channel)

    def publish(self, channel: str, payload: str) -> None:
        self._dispatch(channel, payload)

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass


class PostgresBus(LocalBus):
    """LISTEN on a dedicated autocommit psycopg connection (reconnected with backoff);
    publish = pg_notify through a short-lived connection of the same kind."""

    def __init__(self, sqlalchemy_url: str, reconnect_max_s: float = 5.0) -> None:
        super().__init__()
        from sqlalchemy.engine import make_url

        url = make_url(sqlalchemy_url).set(drivername="postgresql")
        self.dsn = url.render_as_string(hide_password=False)
        self.reconnect_max_s = reconnect_max_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._conn = None
        self._send = None
        self._send_lock = threading.Lock()
        self.connected = threading.Event()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._listen, name="pg-listen", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        with self._send_lock:
            if self._send is not None:
                try:
                    self._send.close()
                except Exception:  # noqa: BLE001
                    pass
                self._send = None

    def publish(self, channel: str, payload: str) -> None:
        """Local handlers at once; every replica (this one again, harmlessly) by NOTIFY."""
        self._dispatch(channel, payload)
        import psycopg

        with self._send_lock:
            for _ in range(2):  # once more on a fresh connection after a PostgreSQL restart
                try:
                    if self._send is None or self._send.closed:
                        self._send = psycopg.connect(self.dsn, autocommit=True, connect_timeout=5)
                    self._send.execute("SELECT pg_notify(%s, %s)", (PREFIX + channel, payload))
                    return
                except psycopg.Error as exc:
                    from api.db import outage, unavailable

                    if unavailable(exc):
                        outage.failed(f"NOTIFY {channel} (other replicas see it at their next poll)", exc)
                    else:
                        log.warning("NOTIFY %s failed (%s); other replicas will see it at their next poll", channel, exc)
                    try:
                        self._send.close()
                    except Exception:  # noqa: BLE001
                        pass
                    self._send = None

    def _listen(self) -> None:
        import psycopg

        delay = 0.2
        lost = False
        while not self._stop.is_set():
            try:
                with psycopg.connect(self.dsn, autocommit=True, connect_timeout=5) as conn:
                    for channel in list(self._handlers):
                        conn.execute(f'LISTEN "{PREFIX}{channel}"')
                    self.connected.set()
                    if lost:
                        log.info("LISTEN connection back")
                        lost = False
                    delay = 0.2
                    for channel in list(self._handlers):
                        self._dispatch(channel, None)  # whatever happened while we were not listening
                    while not self._stop.is_set():
                        for note in conn.notifies(timeout=0.5, stop_after=64):
                            self._dispatch(note.channel.removeprefix(PREFIX), note.payload)
            except psycopg.Error as exc:
                self.connected.clear()
                if self._stop.is_set():
                    return
                if not lost:  # once per outage; reconnects quietly with backoff until it is back
                    log.warning("LISTEN connection lost (%s); reconnecting every %.1f s at most", str(exc).strip()[:300],
                                self.reconnect_max_s)
                    lost = True
                self._stop.wait(delay)
                delay = min(self.reconnect_max_s, delay * 2)


def make_bus(database_url: str) -> LocalBus:
    return PostgresBus(database_url) if database_url.startswith("postgresql") else LocalBus()
