"""Finding what commands work on: the Celery app, the store, a time zone; every failure turned
into one clear line.

The same commands run as ``hashbeat CMD -A proj`` and as ``celery -A proj hashbeat CMD``: an
``-A`` given to the command wins, else the app Celery's own ``-A`` loaded is used.
"""

from __future__ import annotations

import sysconfig
import traceback
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import tzinfo
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from celery.app.utils import find_app
from celery.bin.base import CLIContext

from celery_hashbeat.cli.output import SetupError, StoreFailure
from celery_hashbeat.control.views import Planned, plan_schedule
from celery_hashbeat.entries.catalog import Catalog
from celery_hashbeat.entries.entry import Entry
from celery_hashbeat.entries.errors import EntryError
from celery_hashbeat.expr import CronSyntaxError
from celery_hashbeat.expr.zones import load_zone
from celery_hashbeat.settings import DEFAULT_KEY_PREFIX, Settings
from celery_hashbeat.store import Store, StoreConfigError, StoreError, open_store

if TYPE_CHECKING:
    from celery import Celery

    from celery_hashbeat.store.values import Fence


def app_option(function: Callable[..., Any]) -> Callable[..., Any]:
    """``-A/--app``, spelled as Celery spells it."""
    return click.option(
        "-A",
        "--app",
        "app_name",
        metavar="APP",
        help="The Celery app, as for celery -A: a module, package, or module:attribute.",
    )(function)


def zone_option(help_text: str, default: str | None = None) -> Callable[..., Any]:
    """``--tz``: an IANA zone name, checked and loaded while the options are read."""

    def load(_: click.Context, __: click.Parameter, name: str | None) -> tzinfo | None:
        try:
            return None if name is None else load_zone(name)
        except CronSyntaxError as exc:
            raise click.BadParameter(str(exc)) from None

    return click.option(
        "--tz",
        metavar="ZONE",
        default=default,
        show_default=default is not None,
        callback=load,
        help=help_text,
    )


def find_celery_app(name: str | None) -> Celery | None:
    """The app named by the command's ``-A``, else the one ``celery -A`` loaded, else None."""
    if name:
        return _load(name)
    context = click.get_current_context()
    root = context.find_root()
    celery_context = context.find_object(CLIContext)
    if celery_context is not None and root.params.get("app") is not None:
        app: Celery = celery_context.app
        return app
    return None


def require_app(name: str | None) -> Celery:
    """The app, or a usage error that says how to give one."""
    app = find_celery_app(name)
    if app is None:
        raise click.UsageError(
            "this command needs the Celery app: pass -A proj (or run celery -A proj hashbeat ...)"
        )
    return app


def _load(name: str) -> Celery:
    module = name.partition(":")[0]
    try:
        app: Celery = find_app(name)
    except ModuleNotFoundError as exc:
        if exc.name == name and ":" in name:  # Celery's find_app retries "m:a" as a module
            attribute = name.partition(":")[2]
            raise SetupError(
                f"cannot load the app {name!r}: module {module!r} has no attribute {attribute!r}"
            ) from None
        if exc.name and (module == exc.name or module.startswith(f"{exc.name}.")):
            raise SetupError(
                f"cannot load the app {name!r}: there is no module {exc.name!r} (run from the "
                "project's directory, or add it to PYTHONPATH)"
            ) from None
        raise SetupError(f"importing the app {name!r} failed{where_raised(exc)}: {exc}") from None
    except AttributeError as exc:
        raise SetupError(f"cannot load the app {name!r}{where_raised(exc)}: {exc}") from None
    except Exception as exc:  # any failure of the user's module is reported
        raise SetupError(
            f"importing the app {name!r} failed{where_raised(exc)}: {type(exc).__name__}: {exc}"
        ) from None
    from celery import Celery  # noqa: PLC0415 - only needed here, and only for the check

    if not isinstance(app, Celery):
        raise SetupError(f"{name!r} is a {type(app).__name__}, not a Celery app")
    return app


def beat_schedule(app: Celery) -> Mapping[str, Any]:
    """The app's beat_schedule as beat sees it: task modules imported first, so that entries
    added with ``app.add_periodic_task`` (often from ``on_after_configure``) are in it."""
    try:
        app.loader.import_default_modules()
        schedule: Mapping[str, Any] = app.conf.beat_schedule or {}
    except Exception as exc:  # any failure of the user's modules is reported
        raise SetupError(
            f"loading the app's modules failed{where_raised(exc)}: {type(exc).__name__}: {exc}"
        ) from None
    return schedule


#: Where code that is not the user's lives: the interpreter's library, installed packages, this
#: package.
LIBRARIES = tuple(
    {*(sysconfig.get_paths()[key] for key in ("stdlib", "purelib", "platlib"))}
    | {str(Path(__file__).resolve().parents[1])}
)


def where_raised(exc: BaseException) -> str:
    """`` (FILE, line N)``: the line of the user's code that ``exc`` came from (a syntax error's
    own line), so that a failing import can be found; empty if none is the user's."""
    if isinstance(exc, SyntaxError) and exc.filename:
        return f" ({exc.filename}, line {exc.lineno})"
    frames = [
        frame
        for frame in traceback.extract_tb(exc.__traceback__)
        if not frame.filename.startswith(("<", *LIBRARIES))
    ]
    return f" ({frames[-1].filename}, line {frames[-1].lineno})" if frames else ""


@dataclass
class Built:
    """The app's entries as a leader holds them: the beats' own build (``plan_schedule``), with
    the store's entries, copies and balanced placements, and what the commands show of it."""

    planned: Planned
    #: Entry -> the first line of its error, for each entry that cannot run.
    errors: dict[str, str] = field(default_factory=dict)
    #: Fanned-out entries with no copy now (``"*"`` with no workers known, or an empty list),
    #: each built for a placeholder worker: what it runs, not when.
    idle: dict[str, Entry] = field(default_factory=dict)

    @property
    def entries(self) -> list[Entry]:
        """The entries the leader runs, in name order."""
        entries = self.planned.catalog.entries
        return [entries[name] for name in sorted(entries)]

    @property
    def subs(self) -> dict[str, tuple[str, str]]:
        """Copy -> (the fanned-out entry it copies, its worker node)."""
        return {
            sub: (parent, sub[len(parent) + 1 :])
            for parent, subs in self.planned.catalog.fanout.subs.items()
            for sub in subs
        }

    @property
    def every_worker(self) -> set[str]:
        """The entries with ``"workers": "*"``."""
        return set(self.planned.catalog.fanout.every_worker)

    @property
    def balanced(self) -> dict[str, tuple[int, ...]]:
        """Balanced entry -> the offsets of its hash terms (docs/design.md §16)."""
        return dict(self.planned.catalog.balancer.offsets)

    def next_slot(self, name: str, fence: Fence | None, now_ms: int) -> int | None:
        """Entry ``name``'s next slot as the leader plans it from ``fence`` (due now when one
        was missed); None when it sends no more."""
        slots = self.planned.next_slots(name, fence, now_ms, 1)
        return slots[0] if slots else None

    def silent(self, name: str, fence: Fence | None) -> str | None:
        """Why the leader sends nothing more of entry ``name`` ("paused", "max_runs 3 used
        up"), or None."""
        return self.planned.silent(name, fence)


def build_entries(
    app: Celery, now: int, store: Store | None = None, balance: bool | None = None
) -> Built:
    """The app's entries built by the beats' catalog: beat_schedule, Celery's own entries and,
    with ``store``, the stored entries, the operators' floors and the ``"*"`` entries fanned
    out to the leader's census; the first line of the error of each entry that cannot run.
    ``balance`` overrides ``hashbeat_balance``."""
    configured = beat_schedule(app)
    settings = app_settings(app)
    if balance is not None:
        settings = replace(settings, balance=balance)
    planned = plan_schedule(app, settings, configured, store, now)
    catalog = planned.catalog
    built = Built(planned, {name: text.splitlines()[0] for name, text in planned.refusals.items()})
    definitions = {**catalog.stored, **catalog.configured}
    for parent in sorted(name for name, subs in catalog.fanout.subs.items() if not subs):
        try:
            built.idle[parent] = Catalog.trial(app, settings, now, parent, definitions[parent])
        except EntryError as exc:
            built.errors[parent] = str(exc).splitlines()[0]
    return built


def app_settings(app: Celery) -> Settings:
    """The app's hashbeat_* settings, checked as the scheduler checks them."""
    try:
        return Settings.from_conf(app.conf)
    except Exception as exc:  # ImproperlyConfigured, or a broken config module
        raise SetupError(str(exc)) from None


def chosen_store(
    app: Celery | None, store_url: str | None, prefix: str | None
) -> tuple[str, str, dict[str, object]]:
    """The store a command looks at (URL, prefix, options): ``--store`` and ``--prefix`` when
    given, else the app's settings; the prefix defaults to hashbeat's."""
    options: dict[str, object] = {}
    if app is not None:
        settings = app_settings(app)
        prefix = prefix or settings.key_prefix
        if store_url is None:
            store_url, options = settings.store_url, dict(settings.store_options)
    if store_url is None:
        raise click.UsageError("give the app with -A proj, or the store with --store URL")
    return store_url, prefix or DEFAULT_KEY_PREFIX, options


@contextmanager
def connected(url: str, prefix: str, options: Mapping[str, Any] | None = None) -> Iterator[Store]:
    """An open, answering store, closed afterwards; its failures inside become Failures."""
    try:
        store = open_store(url, prefix, **(options or {}))
    except StoreConfigError as exc:
        raise SetupError(str(exc)) from None
    try:
        with store_errors():
            store.ping()
            yield store
    finally:
        store.close()


@contextmanager
def store_errors() -> Iterator[None]:
    """Any store failure inside becomes one line and exit code 4."""
    try:
        yield
    except StoreError as exc:
        # The stores word their errors for a beat's log, which retries; this command does not.
        raise StoreFailure(str(exc).removesuffix("; will retry")) from None
