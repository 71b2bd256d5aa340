"""Who is calling the API: a bearer token of role `agent` or `reviewer`, or a
dashboard session for reads. No role can promote: promotion has no endpoint at all (semantics §3).
"""

from datetime import timedelta

from django.utils import timezone
from ninja.security import HttpBearer, django_auth

from lifecycle.models import ApiToken, TokenRole
from lifecycle.services.tokens import hash_key, live_token_cached, live_token_remember
from lifecycle.states import Actor

# Writing last_used_at on every request would turn each read into a write; a minute is plenty
# to tell a live token from a dead one.
LAST_USED_RESOLUTION = timedelta(minutes=1)


class Forbidden(Exception):
    """Authenticated, but this role may not do this (HTTP 403)."""


def token_for_key(key: str) -> ApiToken | None:
    """The live token with this clear key, or None (unknown or revoked). A token found within
    the last `CAUTERWEB_TOKEN_CACHE_SECONDS` is not read again (`tokens.live_token_cached`)."""
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


class TokenAuth(HttpBearer):
    """`Authorization: Bearer <token>`; with `role="reviewer"` an agent token gets 403."""

    def __init__(self, role: str | None = None):
        super().__init__()
        self.role = role

    def authenticate(self, request, token: str) -> ApiToken | None:
        found = token_for_key(token.strip())
        if found is None:
            return None
        if self.role == TokenRole.REVIEWER and found.role != TokenRole.REVIEWER:
            raise Forbidden(f"token {found.name!r} has role {found.role}; this needs a reviewer")
        return found


any_token = TokenAuth()
reviewer_token = TokenAuth(role=TokenRole.REVIEWER)
# Reads also accept a logged-in dashboard user (Django session; CSRF applies to writes only,
# and writes take tokens only).
READ = [any_token, django_auth]
WRITE = [any_token]
REVIEW = [reviewer_token]


def request_actor(request) -> Actor:
    """The journal's actor for a write: the token's name (writes take tokens only)."""
    token: ApiToken = request.auth
    if token.role == TokenRole.REVIEWER:
        return Actor.reviewer(token.name)
    return Actor.agent(token.name)
