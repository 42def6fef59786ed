"""CSRF tokens (a signed double submit, docs/security.md: The vault) and the response headers of
every vault page. Another site, or another local app on a loopback port (cookies are not
port-bound), can neither read a token out of our pages (no CORS) nor compute one (the secret
never leaves this process).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

COOKIE = "dsh_memory_vault"
FIELD = "csrf"
NONCE_BYTES = 32

# Nothing inline, nothing from elsewhere: styles and (no) scripts from this server only.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; font-src 'self'; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    # not no-referrer: under it Chromium sends `Origin: null` with the pages' own form posts,
    # which the guard (rightly) refuses; same-origin still sends nothing to other sites.
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}


class Csrf:
    def __init__(self):
        self._secret = secrets.token_bytes(32)

    @staticmethod
    def new_nonce() -> str:
        return secrets.token_urlsafe(NONCE_BYTES)

    def token(self, nonce: str, action: str) -> str:
        return hmac.new(self._secret, f"{nonce}|{action}".encode(), hashlib.sha256).hexdigest()

    def valid(self, nonce: str | None, action: str, token: str | None) -> bool:
        if not nonce or not token or len(nonce) > 200 or len(token) > 200:
            return False
        return hmac.compare_digest(self.token(nonce, action), token)
