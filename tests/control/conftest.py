"""The control room's fixtures (tests/control/fixtures.py)."""

from tests.control.fixtures import admin, poll_every_tick

__all__ = ["admin", "poll_every_tick"]
