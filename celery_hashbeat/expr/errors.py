"""The engine's errors: every bad expression is one CronSyntaxError that points at the fault."""

from __future__ import annotations

from celery_hashbeat.errors import HashbeatError


class CronSyntaxError(ValueError, HashbeatError):
    """A malformed or impossible expression.

    The message names the field and the offending text, then shows the expression with a caret
    line under the fault, so a user can fix it without counting characters.
    """

    def __init__(
        self,
        message: str,
        expression: str = "",
        start: int = 0,
        end: int | None = None,
        field: str | None = None,
    ) -> None:
        self.message = message
        self.expression = expression
        self.start = start
        self.end = max(end if end is not None else len(expression), start + 1)
        self.field = field
        super().__init__(self._render())

    @property
    def text(self) -> str:
        """The offending part of the expression."""
        return self.expression[self.start : self.end]

    def _render(self) -> str:
        if not self.expression:
            return self.message
        shown = self.expression.expandtabs(1)
        caret = " " * self.start + "^" * (self.end - self.start)
        return f"{self.message}\n  {shown}\n  {caret}"


class NoFireTimeError(LookupError, HashbeatError):
    """No fire time exists in the asked direction (the calendar's end, or a time zone whose
    transitions swallow every matching wall time)."""


class CalendarError(ValueError, HashbeatError):
    """An exclude entry (or on_excluded value) that does not parse, or a calendar that excludes
    every day; the message names it and says what to write."""
