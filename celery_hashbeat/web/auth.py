"""Who may act, and that a form came from our own page (docs/design.md §18).

Reading needs nothing. Acting needs the token (``hashbeat_web_token`` or ``HASHBEAT_WEB_TOKEN``):
the login form exchanges it for a session cookie signed with a key drawn from the token, so
changing the token ends every session. Every form carries a CSRF token: an HMAC of a random
per-browser cookie, which a page of another site can neither read nor forge."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time

SESSION_COOKIE = "hashbeat_session"
CSRF_COOKIE = "hashbeat_csrf"

#: How long a login lasts (seconds).
SESSION_S = 12 * 3600


class Guard:
    """Checks logins, sessions and CSRF tokens for one app."""

    def __init__(self, token: str | None) -> None:
        self.token = token or None
        seed = b"hashbeat-web:" + (self.token or secrets.token_hex(32)).encode()
        self._key = hashlib.sha256(seed).digest()

    @property
    def can_act(self) -> bool:
        """Actions are possible at all: without a token the console only reads."""
        return self.token is not None

    def _sign(self, text: str) -> str:
        return hmac.new(self._key, text.encode(), hashlib.sha256).hexdigest()

    def login(self, given: str) -> str | None:
        """The session cookie's value for the right token, else None."""
        if self.token is None or not hmac.compare_digest(given.encode(), self.token.encode()):
            return None
        issued = str(int(time.time()))
        return f"{issued}.{self._sign('session:' + issued)}"

    def in_session(self, cookie: str | None) -> bool:
        if self.token is None or not cookie or "." not in cookie:
            return False
        issued, mac = cookie.split(".", 1)
        if not issued.isdigit() or not hmac.compare_digest(mac, self._sign("session:" + issued)):
            return False
        return 0 <= time.time() - int(issued) < SESSION_S

    @staticmethod
    def new_browser_id() -> str:
        return secrets.token_hex(16)

    def csrf_token(self, browser_id: str) -> str:
        """The hidden field every form of this browser carries."""
        return self._sign("csrf:" + browser_id)

    def csrf_ok(self, browser_id: str | None, given: str | None) -> bool:
        if not browser_id or not given:
            return False
        return hmac.compare_digest(given, self.csrf_token(browser_id))
