"""kombu's filesystem transport, with each message written whole before a worker can see it.

kombu's own ``Channel._put`` creates the message file and then writes into it, while its
``_get`` takes any file whose name ends in ``.<queue>.msg`` at once, unlocked: a worker polling
just then reads an empty file and dies on the JSON error. Here a message is written under a name
``_get`` skips and renamed into place, which the file system does in one step.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from time import monotonic
from typing import Any

from kombu.exceptions import ChannelError
from kombu.transport import TRANSPORT_ALIASES, filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps

#: The broker URL scheme of this transport (``atomic-filesystem://``).
SCHEME = "atomic-filesystem"


class Channel(filesystem.Channel):
    def _put(self, queue: str, payload: Any, **kwargs: Any) -> None:
        name = f"{round(monotonic() * 1000)}_{uuid.uuid4()}.{queue}.msg"
        final = Path(self.data_folder_out) / name
        partial = final.with_name(f".{name}.part")  # not a ".msg" name: _get skips it
        try:
            partial.write_bytes(str_to_bytes(dumps(payload)))
            partial.replace(final)
        except OSError as exc:
            raise ChannelError(f"Cannot add file {str(final)!r} to directory") from exc


class Transport(filesystem.Transport):
    Channel = Channel


TRANSPORT_ALIASES[SCHEME] = f"{__name__}:Transport"
