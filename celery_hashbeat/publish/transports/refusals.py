"""Which messages of a chunk went out when RabbitMQ closed the channel under it.

RabbitMQ handles a channel's frames in order. A publish it cannot route to an exchange (one it
does not have) makes it close the channel (Channel.Close, 404 NOT_FOUND, naming the exchange),
and until the client acknowledges the close it discards every frame that comes on the channel
(AMQP 0-9-1, "after sending this method any received method except Close-OK must be
discarded"). So, for a chunk written in one go (docs/design.md §15):

- the messages before the refused one were handled: taken (or nacked, with confirms);
- the refused one is undeliverable: its slot is dropped, and so are its entry's later slots
  until the exchange exists;
- the ones after it surely never arrived: they are written again on the reopened channel.

The refused message is the first of the chunk to the exchange the broker names. Should several
messages of the chunk go to that exchange (it was deleted while the chunk was on its way), the
one refused may be any of them: those between the first and the last are then unsure (kept, never
sent twice), unless a confirm says otherwise. A close that names no exchange of the chunk leaves
every unconfirmed message of it unsure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from celery_hashbeat.publish.batch import MayHaveGone, Undeliverable

#: The broker's answer to one message so far: None (taken), an exception (nacked or refused), or
#: False (no answer yet, or none expected: without confirms).
Answer = BaseException | bool | None

#: AMQP's reply code for something missing, and the method that publishes (class 60, method 40).
NOT_FOUND = 404
BASIC_PUBLISH = (60, 40)
_NAMED_EXCHANGE = re.compile(r"exchange '([^']*)'")


@dataclass
class SortedOut:
    """A chunk's messages after the channel was closed, by position in the chunk."""

    #: The settled ones: None (went out) or why not.
    verdicts: dict[int, BaseException | None] = field(default_factory=dict)
    #: The ones that surely never arrived, to write again.
    again: list[int] = field(default_factory=list)
    #: The exchange the broker said it does not have, if it said so.
    missing: str | None = None


def missing_exchange(exc: BaseException) -> str | None:
    """The exchange a channel close says a publish named and the broker does not have."""
    if getattr(exc, "code", None) != NOT_FOUND:
        return None
    if tuple(getattr(exc, "method_sig", None) or ()) != BASIC_PUBLISH:
        return None
    found = _NAMED_EXCHANGE.search(str(getattr(exc, "reply_text", "") or exc))
    return None if found is None else found.group(1)


def sort_out(exc: BaseException, exchanges: list[str], answers: list[Answer]) -> SortedOut:
    """Settle a chunk whose channel the broker closed with ``exc``: ``exchanges`` and
    ``answers`` are each message's exchange and the broker's answer so far."""
    named = missing_exchange(exc)
    to_named = [position for position, name in enumerate(exchanges) if name == named]
    if named is None or not to_named:
        unsure = MayHaveGone(f"the broker closed the channel with it under way ({exc})")
        return SortedOut({p: _answered(a, unsure) for p, a in enumerate(answers)})
    first, last = to_named[0], to_named[-1]
    out = SortedOut(missing=named)
    for position in range(first):  # handled before the refused one
        out.verdicts[position] = _answered(answers[position], None)
    if first == last:
        out.verdicts[first] = no_such_exchange(named, exc)
    else:
        unsure = MayHaveGone(
            f"the broker closed the channel over another message to exchange {named!r} ({exc})"
        )
        for position in range(first, last + 1):
            out.verdicts[position] = _answered(answers[position], unsure)
    out.again = list(range(last + 1, len(exchanges)))
    return out


def no_such_exchange(exchange: str, exc: BaseException | None) -> Undeliverable:
    """The refusal of a message to an exchange the broker does not have (``exc``: its answer
    now, if it gave one)."""
    said = "" if exc is None else f" ({exc})"
    return Undeliverable(
        f"the broker has no exchange {exchange!r}{said}: declare it, or fix the entry's "
        "exchange option"
    )


def _answered(answer: Answer, otherwise: BaseException | None) -> BaseException | None:
    """The broker's own answer when it gave one, else ``otherwise``."""
    if answer is False:
        return otherwise
    return None if answer is True else answer
