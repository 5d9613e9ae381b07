"""``hashbeat explain``'s "meaning" line for seconds in six-field expressions: a phrase that stops
within a minute or an hour says which one it repeats in, so a list of seconds that fires every
minute is never read as once an hour."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from click.testing import Result

Invoke = Callable[..., Result]


def meaning(invoke: Invoke, expression: str) -> str:
    result = invoke("explain", expression, "--json")
    assert result.exit_code == 0, result.output
    description: str = json.loads(result.stdout)["description"]
    return description


@pytest.mark.parametrize(
    ("expression", "sentence"),
    [
        # Seconds that fire in every minute say so.
        ("15,45 * * * * *", "At seconds 15 and 45 of every minute"),
        ("0,30 * * * * *", "At seconds 0 and 30 of every minute"),
        ("5-10 * * * * *", "Every second from second 5 to second 10 of every minute"),
        ("15,45 * 3 * * *", "At seconds 15 and 45 of every minute, 3:00-3:59 every day"),
        # A step that does not divide 60 starts again at each minute: not "every 25 seconds".
        ("*/25 * * * * *", "Every 25 seconds from second 0 to second 50 of every minute"),
        # Seconds within one minute of the hour repeat each hour.
        ("*/20 5 * * * *", "Every 20 seconds, during minute 5 of every hour"),
        ("* 5 * * * *", "Every second, during minute 5 of every hour"),
        ("15,45 5 * * * *", "At seconds 15 and 45, during minute 5 of every hour"),
        # Phrases that run on without a break need nothing more.
        ("15 * * * * *", "Every minute, at second 15"),
        ("*/20 * * * * *", "Every 20 seconds"),
        ("5/20 * * * * *", "Every 20 seconds starting at second 5"),
        # A few seconds at one time of day read as clock times.
        ("15,45 5 3 * * *", "At 03:05:15 and 03:05:45 every day"),
    ],
)
def test_seconds_say_what_they_repeat_in(invoke: Invoke, expression: str, sentence: str) -> None:
    assert meaning(invoke, expression) == sentence


def test_minutes_that_stop_within_the_hour_say_so(invoke: Invoke) -> None:
    assert meaning(invoke, "5-10 * * * *") == "Every minute from :05 to :10 of every hour"
    assert meaning(invoke, "*/7 * * * *") == "Every 7 minutes from :00 to :56 of every hour"
    assert meaning(invoke, "*/15 * * * *") == "Every 15 minutes"
    assert meaning(invoke, "5 * * * *") == "At minute 5 of every hour"
