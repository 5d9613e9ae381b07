"""How a chunk is settled when RabbitMQ closed the channel under it (docs/design.md §15): the
broker's own exception objects (py-amqp's, as its channel raises them on a Channel.Close), the
chunk's exchanges and the confirms that came. At most once: a message is written again only if
the broker surely discarded it."""

from __future__ import annotations

import amqp

from celery_hashbeat.publish.batch import MayHaveGone, Undeliverable
from celery_hashbeat.publish.transports.refusals import Answer, missing_exchange, sort_out

PUBLISH = (60, 40)


def closed(text: str, code: int = 404, method: tuple[int, int] = PUBLISH) -> BaseException:
    """What py-amqp raises when the broker closes a channel with ``code`` and ``text``."""
    return amqp.error_for_code(code, text, method, amqp.ChannelError)


NO_SUCH = closed("NOT_FOUND - no exchange 'gone' in vhost 'v'")


def test_the_close_names_the_missing_exchange_of_a_publish_only() -> None:
    assert missing_exchange(NO_SUCH) == "gone"
    assert missing_exchange(closed("NOT_FOUND - no queue 'q' in vhost 'v'")) is None
    assert missing_exchange(closed("NOT_FOUND - no exchange 'x'", method=(50, 10))) is None
    assert missing_exchange(closed("ACCESS_REFUSED - exchange 'x'", code=403)) is None


def test_the_refused_message_is_dropped_those_before_sent_those_after_written_again() -> None:
    out = sort_out(NO_SUCH, ["", "work", "gone", "", "work"], [False] * 5)
    assert out.missing == "gone"
    assert out.verdicts[0] is None and out.verdicts[1] is None
    assert isinstance(out.verdicts[2], Undeliverable) and "'gone'" in str(out.verdicts[2])
    assert set(out.verdicts) == {0, 1, 2}
    assert out.again == [3, 4]


def test_a_nack_before_the_refused_message_stays_a_nack() -> None:
    answers: list[Answer] = [MayHaveGone("nacked"), None, False, False]
    out = sort_out(NO_SUCH, ["", "", "gone", ""], answers)
    assert isinstance(out.verdicts[0], MayHaveGone)
    assert out.verdicts[1] is None
    assert out.again == [3]


def test_several_messages_to_the_exchange_leave_those_between_unsure() -> None:
    out = sort_out(NO_SUCH, ["gone", "", "gone", ""], [False, None, False, False])
    assert isinstance(out.verdicts[0], MayHaveGone)  # it may be the one routed before deletion
    assert out.verdicts[1] is None  # confirmed: taken
    assert isinstance(out.verdicts[2], MayHaveGone)
    assert out.again == [3]


def test_a_close_that_names_no_exchange_of_the_chunk_writes_nothing_again() -> None:
    for exc in (closed("PRECONDITION_FAILED - message too large", code=406), NO_SUCH):
        out = sort_out(exc, ["", "work"], [None, False])
        assert out.again == []
        assert out.verdicts[0] is None  # its confirm came
        assert isinstance(out.verdicts[1], MayHaveGone)
