"""How a store's location is shown: a database URL without its password.

Apart from the backends' packages so that the CLI, the messages and every backend use it
without importing a database driver.
"""

from __future__ import annotations

import urllib.parse

#: How a message names a URL too malformed to show without its password.
UNREADABLE_URL = "a PostgreSQL database"

#: The query parameters that hold a secret: the password, and the passphrase of the
#: client's SSL key.
SECRETS = frozenset({"password", "sslpassword"})


def without_password(url: str) -> str:
    """``url`` as shown in messages: its password (in the authority or the query) and its
    SSL key's passphrase removed."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return UNREADABLE_URL
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        netloc = userinfo.split(":", 1)[0] + "@" + host
    # The other pairs keep their text as written: decoded and encoded again, an escaped
    # space (%20) would come back as "+", which libpq reads as a plus sign.
    query = "&".join(
        pair
        for pair in parts.query.split("&")
        if pair and urllib.parse.unquote(pair.partition("=")[0]) not in SECRETS
    )
    # Built by hand: urlunsplit drops the empty authority of postgresql:///db?host=/socket.
    shown = f"{parts.scheme}://{netloc}{parts.path}"
    return shown + (f"?{query}" if query else "")


def has_password(url: str) -> bool:
    """Whether a database URL holds a password (in its authority or its query) or an SSL
    key's passphrase."""
    try:
        parts = urllib.parse.urlsplit(url)
        return parts.password is not None or any(
            key in SECRETS for key, _ in urllib.parse.parse_qsl(parts.query)
        )
    except ValueError:
        return True  # unreadable: shown without what might be one


__all__ = ["UNREADABLE_URL", "has_password", "without_password"]
