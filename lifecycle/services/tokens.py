"""API tokens: created and revoked here only, each change journaled with who did it.

The clear key is returned once, by `token_create`; only its SHA-256 is stored, so a leaked
database does not leak working tokens.
"""

import hashlib
import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.core.cache import caches
from django.db import IntegrityError, transaction
from django.utils import timezone

from lifecycle import journal
from lifecycle.journal import EventType

from ..models import ApiToken, TokenRole

KEY_PREFIX = "cw_"
# Writing last_used_at on every request would turn each read into a write; a minute is plenty
# to tell a live token from a dead one.
LAST_USED_RESOLUTION = timedelta(minutes=1)
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,149}$")


class InvalidToken(ValueError):
    """A token that cannot be created; `field` names the argument at fault."""

    def __init__(self, message: str, *, field: str):
        super().__init__(message)
        self.field = field


class TokenNotFound(LookupError):
    pass


@dataclass(frozen=True)
class IssuedToken:
    token: ApiToken
    # The only time the clear key exists outside the caller's hands.
    key: str


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


# Live tokens this process has found lately, by key hash, in the local-memory cache `tokens`
# (settings.CACHES). Looking a token up cost a query on every API request; a token found within
# the last `CAUTERWEB_TOKEN_CACHE_SECONDS` is taken from the cache instead. A revocation in this
# process drops its entry at once; another process (the command line, another worker) is obeyed
# within that many seconds. Unknown keys are never remembered, so a new token works at once. A
# process-local cache on purpose: a shared one (Redis) would put the broker on the path of every
# API call.


def live_token_cached(key_hash: str) -> ApiToken | None:
    return caches["tokens"].get(key_hash)


def live_token_remember(token: ApiToken) -> None:
    ttl = settings.CAUTERWEB_TOKEN_CACHE_SECONDS
    if ttl > 0:
        caches["tokens"].set(token.key_hash, token, timeout=ttl)


def token_for_key(key: str) -> ApiToken | None:
    """The live token with this clear key, or None (unknown or revoked): the API's bearer
    check and the MCP server's. A token found within the last `CAUTERWEB_TOKEN_CACHE_SECONDS`
    is not read again."""
    key_hash, now = hash_key(key), timezone.now()
    token = live_token_cached(key_hash)
    if token is None:
        token = ApiToken.objects.filter(key_hash=key_hash, revoked_at__isnull=True).first()
        if token is None:
            return None
        live_token_remember(token)
    if token.last_used_at is None or now - token.last_used_at >= LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
        # The cache holds a copy: without this, every request until it expires wrote again.
        live_token_remember(token)
    return token


def live_tokens_forget(key_hash: str | None = None) -> None:
    """Forget one token (or all): the next request with it reads the database."""
    if key_hash is None:
        caches["tokens"].clear()
    else:
        caches["tokens"].delete(key_hash)


def clean_name(name: str) -> str:
    """The token name, checked: it names the actor in the journal."""
    name = (name or "").strip()
    if not _NAME.match(name):
        raise InvalidToken(
            "name must be 1-150 letters, digits or _.@- (it names the actor in the journal)",
            field="name",
        )
    return name


def token_create(
    *, name: str, role: str, actor: str, created_by=None, now: datetime | None = None
) -> IssuedToken:
    """A new token for `name` with `role`; the name is what the journal records as actor."""
    name = clean_name(name)
    if role not in TokenRole.values:
        raise InvalidToken(f"role must be one of {', '.join(TokenRole.values)}", field="role")
    now = now or timezone.now()
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    try:
        with transaction.atomic():
            token = ApiToken.objects.create(
                name=name,
                role=role,
                key_hash=hash_key(key),
                prefix=key[:10],
                created_at=now,
                created_by=created_by,
            )
            journal.write(
                type=EventType.TOKEN_CREATED,
                actor=actor,
                at=now,
                evidence={"name": name, "role": role, "prefix": token.prefix},
            )
    except IntegrityError:
        # Names stay unique even after revocation: old journal rows keep meaning one token.
        raise InvalidToken(f"a token named {name!r} already exists", field="name") from None
    return IssuedToken(token=token, key=key)


def token_revoke(*, name: str, actor: str, now: datetime | None = None) -> bool:
    """Revoke a token; False when it was already revoked (revoking twice is a no-op)."""
    now = now or timezone.now()
    with transaction.atomic():
        token = ApiToken.objects.select_for_update().filter(name=name).first()
        if token is None:
            raise TokenNotFound(name)
        changed = ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(
            revoked_at=now
        )
        # Before the commit, not on it: a request of this process between the two would
        # otherwise still pass; if the revocation rolls back, only a lookup is lost.
        live_tokens_forget(token.key_hash)
        if changed:
            journal.write(
                type=EventType.TOKEN_REVOKED,
                actor=actor,
                at=now,
                evidence={"name": token.name, "role": token.role, "prefix": token.prefix},
            )
    return bool(changed)
