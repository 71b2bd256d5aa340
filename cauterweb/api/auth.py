"""Who is calling the API: a bearer token of role `agent` or `reviewer`, or a
dashboard session for reads. No role can promote: promotion has no endpoint at all (semantics §3).
"""

from ninja.security import HttpBearer, django_auth

from lifecycle.models import ApiToken, TokenRole
from lifecycle.services.tokens import token_for_key
from lifecycle.states import Actor


class Forbidden(Exception):
    """Authenticated, but this role may not do this (HTTP 403)."""


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
