"""The single-flight round lock (semantics §9.1): at most one round at a time across all workers,
and a lock that expires if its holder dies.

Redis (`SET NX PX`) when `CAUTERWEB_LOCK_URL` is a Redis URL; otherwise the EngineLock row,
claimed by a conditional UPDATE — 0 rows updated means someone else holds it. The holder
extends the lock while it works, so the expiry only has to outlast one case, not a round.
"""

import secrets
from datetime import timedelta
from functools import cache

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from .models import EngineLock

ROUND_LOCK = "validation-round"
# Release and extend only if we still hold it: compare and act in one Redis step.
_RELEASE = (
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0"
)
_EXTEND = (
    "if redis.call('get', KEYS[1]) == ARGV[1] then "
    "return redis.call('pexpire', KEYS[1], ARGV[2]) end return 0"
)


def lock_ttl_s() -> float:
    """Long enough for the slowest legal case (env wait + replay timeout), with room to spare."""
    return settings.CAUTERWEB_REPLAY_ENV_WAIT_TIMEOUT_S + settings.CAUTERWEB_REPLAY_TIMEOUT_S + 60.0


def new_holder() -> str:
    return secrets.token_hex(8)


@cache
def redis_client(url: str):
    """One client (and its connection pool) per URL and process."""
    import redis

    return redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=2)


def _redis_key(name: str) -> str:
    return f"cauterweb:lock:{name}"


def acquire(holder: str, *, name: str = ROUND_LOCK, ttl_s: float | None = None) -> bool:
    ttl_s = lock_ttl_s() if ttl_s is None else ttl_s
    url = settings.CAUTERWEB_LOCK_URL
    if url.startswith("redis"):
        return bool(redis_client(url).set(_redis_key(name), holder, nx=True, px=int(ttl_s * 1000)))
    now = timezone.now()
    if not EngineLock.objects.filter(name=name).exists():
        try:
            with transaction.atomic():
                EngineLock.objects.create(name=name)
        except IntegrityError:
            pass  # another worker created the row a moment ago; the UPDATE below decides
    claimed = (
        EngineLock.objects.filter(name=name)
        .filter(Q(holder="") | Q(expires_at__lt=now) | Q(expires_at__isnull=True))
        .update(holder=holder, expires_at=now + timedelta(seconds=ttl_s))
    )
    return claimed == 1


def extend(holder: str, *, name: str = ROUND_LOCK, ttl_s: float | None = None) -> bool:
    """Push the expiry out; False if the lock expired and someone else took it."""
    ttl_s = lock_ttl_s() if ttl_s is None else ttl_s
    url = settings.CAUTERWEB_LOCK_URL
    if url.startswith("redis"):
        return bool(redis_client(url).eval(_EXTEND, 1, _redis_key(name), holder, int(ttl_s * 1000)))
    return (
        EngineLock.objects.filter(name=name, holder=holder).update(
            expires_at=timezone.now() + timedelta(seconds=ttl_s)
        )
        == 1
    )


def release(holder: str, *, name: str = ROUND_LOCK) -> None:
    url = settings.CAUTERWEB_LOCK_URL
    if url.startswith("redis"):
        redis_client(url).eval(_RELEASE, 1, _redis_key(name), holder)
        return
    EngineLock.objects.filter(name=name, holder=holder).update(holder="", expires_at=None)
