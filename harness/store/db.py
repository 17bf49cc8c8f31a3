"""Engine creation, URL handling and the migration check.

SQLite (WAL) at ``./harness.db`` by default; PostgreSQL (or anything SQLAlchemy speaks) through
``HARNESS_DB_URL`` / ``--db``. A brand-new database is migrated to head automatically (zero set-up);
an existing one at an older revision is refused with a message to run ``harness db upgrade``, so a
run never writes into a schema it does not understand.

Every failure to open a database is one :class:`DatabaseError` line that names the database (its
password masked) and the reason. A new SQLite file is created only in a folder that exists: the
harness never creates folders for a database, since ``--db sqlite:///reslts/h.db`` is far more often
a typo than a request, and a mistyped folder would silently scatter runs over several databases.
"""

from __future__ import annotations

import os
import random
import re
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import Engine, create_engine, event, inspect, make_url, text
from sqlalchemy.exc import ArgumentError, NoSuchModuleError
from sqlalchemy.exc import DatabaseError as SQLAlchemyDatabaseError
from sqlalchemy.orm import Session, sessionmaker

from harness.errors import UserError
from harness.store import jsoncol

# Beside this module in the installed package (the wheel ships the folder), never in a checkout.
MIGRATIONS = Path(__file__).resolve().parent / "migrations"


def head_revision() -> str:
    """Newest migration id. Files are named ``NNNN_what.py`` with ``revision = "NNNN"`` and each
    revises the one before, so the head is the largest number (no Alembic import at start-up)."""
    revisions = [p.name.split("_", 1)[0] for p in (MIGRATIONS / "versions").glob("[0-9]*_*.py")]
    if not revisions:
        raise DatabaseError(
            f"this harness installation has no migrations in {MIGRATIONS / 'versions'} "
            "(harness/store/migrations/versions is missing from the package); reinstall it from a complete wheel"
        )
    return max(revisions)


class DatabaseError(UserError, RuntimeError):
    """A one-line, user-facing database problem (bad URL, unreachable, needs migration)."""


class _NoStamp(DatabaseError):
    """Harness tables without an Alembic stamp: possibly a database another process is creating."""


def shown_url(url: str) -> str:
    """The URL as messages show it: its password masked, even when SQLAlchemy cannot parse it."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except (ArgumentError, ValueError):
        return re.sub(r"(://[^/@:]*:)[^/@]*@", r"\1***@", url)


def _one_line(error: object, password: str | None = None) -> str:
    """A driver's message on one line (libpq adds a hint line: "Is the server running ...?"), with
    the URL's password removed should the driver quote it."""
    message = "; ".join(line.strip() for line in str(error).splitlines() if line.strip()) or type(error).__name__
    if password and len(password) >= 4:  # shorter ones would mangle words; drivers do not echo them anyway
        message = message.replace(password, "***")
    return message


def default_url() -> str:
    return os.environ.get("HARNESS_DB_URL") or "sqlite:///harness.db"


def _switch_to_wal(cur, deadline_s: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    """``PRAGMA journal_mode=WAL``, retried while another connection holds the file.

    On a brand-new file (still in rollback mode) two connections switching at once both take a
    shared lock and then ask for an exclusive one; SQLite answers the second "database is locked" at
    once, without its busy handler (waiting could deadlock), so the busy timeout does not cover it.
    The first one finishes in milliseconds, after which the switch is a no-op; hence a short retry.
    """
    give_up = time.monotonic() + deadline_s
    pause = 0.005
    while True:
        try:
            cur.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if ("locked" not in str(exc) and "busy" not in str(exc)) or time.monotonic() > give_up:
                raise
            time.sleep(pause * (0.5 + random.random()))  # jitter: two retriers must not collide again
            pause = min(pause * 2, 0.2)


def _sqlite_pragmas(dbapi_conn, _record) -> None:  # type: ignore[no-untyped-def]
    cur = dbapi_conn.cursor()
    _switch_to_wal(cur)
    cur.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: durable at checkpoint, fast commits
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.close()


# JSON columns through orjson both ways (same values as the standard library's, a fraction of the
# time): reading a large run's scores back for its metrics was mostly json.loads
_JSON_CODECS = {"json_serializer": jsoncol.dumps, "json_deserializer": jsoncol.loads}


def make_engine(url: str | None = None) -> Engine:
    url = url or default_url()
    try:
        if url.startswith("sqlite"):
            engine = create_engine(url, connect_args={"timeout": 30}, **_JSON_CODECS)
            event.listen(engine, "connect", _sqlite_pragmas)
        else:
            engine = create_engine(url, pool_pre_ping=True, pool_size=10, max_overflow=20, **_JSON_CODECS)
    except (ArgumentError, NoSuchModuleError) as exc:
        # a plain path is the likeliest slip; any URL SQLAlchemy quotes back is shown password-masked
        plain = "://" not in url and not re.match(r"[A-Za-z][\w+.-]*:", url)
        why = f"not a URL (a SQLite file is sqlite:///{url})" if plain else _one_line(exc).replace(url, shown_url(url))
        raise DatabaseError(f"bad database URL {shown_url(url)!r}: {why}") from None
    except ModuleNotFoundError as exc:
        raise DatabaseError(
            f"database driver {exc.name!r} missing for {shown_url(url)!r} (pip install 'harness[postgres]')"
        ) from None
    return engine


def sqlite_file(engine: Engine) -> Path | None:
    """The file behind a SQLite engine, or None (another engine, an in-memory database)."""
    if engine.dialect.name != "sqlite":
        return None
    db = engine.url.database or ""
    if engine.url.query.get("uri") in ("true", "1") and db.startswith("file:"):
        if engine.url.query.get("mode") == "memory":
            return None
        db = db[len("file:"):]
        if db.startswith("//"):  # file://host/path: the host part is empty or localhost
            db = "/" + db[2:].partition("/")[2]
    if not db or db == ":memory:":
        return None
    return Path(db)


def check_sqlite_file(engine: Engine) -> None:
    """Refuse, in one line, a SQLite file that cannot be opened or created, before SQLite's own
    "unable to open database file" (which names neither the path nor the reason)."""
    path = sqlite_file(engine)
    if path is None:
        return
    if path.is_dir():
        raise DatabaseError(f"cannot open the SQLite database {path}: it is a folder")
    if path.exists():
        return  # SQLite's own errors (not a database, malformed, read-only) name the problem
    if engine.url.query.get("mode") == "ro":
        raise DatabaseError(f"cannot open the SQLite database {path} read-only: it does not exist")
    folder = path.absolute().parent
    if not folder.exists():
        raise DatabaseError(f"cannot create the SQLite database {path}: folder {folder} does not exist "
                            "(create it first; the harness does not create folders for a database)")
    if not folder.is_dir():
        raise DatabaseError(f"cannot create the SQLite database {path}: {folder} is not a folder")
    if not os.access(folder, os.W_OK):
        raise DatabaseError(f"cannot create the SQLite database {path}: folder {folder} is not writable")


def current_revision(engine: Engine) -> str | None:
    """The Alembic revision stamped in the database, or None for an empty database."""
    check_sqlite_file(engine)
    path = sqlite_file(engine)
    existed = path is not None and path.exists()
    try:
        with engine.connect() as conn:
            if not inspect(conn).has_table("alembic_version"):
                if inspect(conn).has_table("runs"):
                    raise _NoStamp("database has harness tables but no alembic_version stamp")
                return None
            return conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
    except SQLAlchemyDatabaseError as exc:  # unreachable server, corrupt or truncated file, not a database
        why = _one_line(exc.orig, engine.url.password)
        if path is not None and not existed and not path.exists():
            # a writable-looking folder that takes no new files (/proc, a read-only mount)
            raise DatabaseError(f"cannot create the SQLite database {path}: folder {path.absolute().parent} "
                                f"does not accept new files ({why})") from None
        raise DatabaseError(f"cannot open database {engine.url!r}: {why}") from None


def alembic_config(engine: Engine):  # type: ignore[no-untyped-def]
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.attributes["engine"] = engine
    return cfg


def upgrade(engine: Engine, revision: str = "head") -> str | None:
    from alembic import command

    head_revision()  # a package without its migrations fails here in one line, not deep inside Alembic
    command.upgrade(alembic_config(engine), revision)
    return current_revision(engine)


def load_all_schemas() -> None:
    """Import every ``schema*.py`` module so ``Base.metadata`` holds all tables of all migrations."""
    import importlib

    for path in sorted(Path(__file__).parent.glob("schema*.py")):
        importlib.import_module(f"harness.store.{path.stem}")


def create_fresh(engine: Engine) -> None:
    """Create an empty database at head without importing Alembic (~0.3 s of start-up saved).

    Equivalent to ``upgrade(engine)`` on an empty database: a test compares the two schemas. Safe
    when several processes open the same new database at once: creation happens under a lock
    (PostgreSQL: an advisory lock; SQLite: a lock file beside the database) and whoever comes second
    finds the stamp and does nothing.
    """
    from harness.store.schema import Base

    load_all_schemas()
    with _creation_lock(engine), engine.begin() as conn:
        if engine.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(7412019)"))  # held until this transaction ends
        if inspect(conn).has_table("alembic_version"):
            return  # created by another process while we waited
        Base.metadata.create_all(conn)
        conn.execute(text("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL PRIMARY KEY)"))
        conn.execute(text("INSERT INTO alembic_version (version_num) VALUES (:v)"), {"v": head_revision()})


@contextmanager
def _creation_lock(engine: Engine) -> Iterator[None]:
    """An exclusive file lock beside a SQLite database file (its DDL is not transactional, so two
    creators would interleave); nothing for other engines or in-memory databases."""
    db = sqlite_file(engine)  # the file itself, also behind a file: URI
    if db is None:
        yield
        return
    import fcntl

    lock = f"{db}.create-lock"
    try:
        handle = open(lock, "a+")  # noqa: SIM115 -- closed by the with below; only the open is guarded
    except OSError as exc:
        raise DatabaseError(f"cannot create the lock file {lock} beside the SQLite database: "
                            f"{exc.strerror or exc}") from None
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def open_db(url: str | None = None, *, auto_create: bool = True) -> sessionmaker[Session]:
    """Engine + session factory for a database that is at the head revision."""
    engine = make_engine(url)
    try:
        rev = current_revision(engine)
    except _NoStamp:
        # "tables but no stamp": another process may be creating this database right now
        if not auto_create:
            raise
        with _creation_lock(engine):
            rev = current_revision(engine)
    if rev is None and auto_create:
        create_fresh(engine)
        rev = current_revision(engine)
    if rev != head_revision():
        raise DatabaseError(
            f"database {engine.url!r} is at revision {rev}, this harness needs {head_revision()}: "
            "run `harness db upgrade`"
        )
    return sessionmaker(engine, expire_on_commit=False)
