"""The console's CSRF tokens: every form that changes something carries one, checked before the
handler runs (synchronizer tokens, stateless).

Logged in, the token is an HMAC of the session cookie (the session's secret, sessions.py) with a
fixed label: a page of this console can put it in its forms, another site cannot read or compute
it (the secret is in an HttpOnly, SameSite=Strict cookie), and it changes with every login.
Before login, a random pre-session cookie stands in for the secret, so a cross-site form cannot
log a victim into the attacker's tenant (login CSRF): that form lacks the cookie (SameSite=Strict)
and the token.

Litestar's own CSRFConfig is application-wide (the REST API, whose callers send keys in headers,
would need excluding), double-submit rather than tied to the session, and needs a server secret
the settings do not have; these few lines do what the console needs.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

FIELD = "csrf"
LOGIN_COOKIE = "cognis_console_login"
REFUSED = (
    "This form's security token is missing or does not match your session (a form from another "
    "site, or a page older than your last log in): nothing was changed. Reload the page and "
    "submit it again."
)


def _mac(secret: str, label: bytes) -> str:
    return hmac.new(secret.encode(), label, hashlib.sha256).hexdigest()


def session_token(secret: str) -> str:
    """The token of the forms of a logged-in session (`secret`: its cookie's value)."""
    return _mac(secret, b"cognis-console-csrf")


def login_token(nonce: str) -> str:
    """The login form's token, paired with the pre-session cookie's nonce."""
    return _mac(nonce, b"cognis-console-login")


def new_nonce() -> str:
    return secrets.token_urlsafe(32)


def accepted(given: str | None, expected: str | None) -> bool:
    """Whether the form's token is the expected one (None: no cookie, nothing is accepted)."""
    if not given or not expected:
        return False
    return hmac.compare_digest(given.encode(), expected.encode())
