"""The single-flight round lock (semantics §9.1): at most one round at a time across all workers,
and a lock that expires if its holder dies.

Redis (redis-py's `Lock`: `SET NX PX`, and a token compared and acted on in one step to extend or
release) when `CAUTERWEB_LOCK_URL` is a Redis URL; otherwise the EngineLock row,
claimed by a conditional UPDATE — 0 rows updated means someone else holds it. The holder
extends the lock while it works, so the expiry only has to outlast one case, not a round.
"""

import secrets
from contextlib import suppress
from datetime import timedelta
from functools import cache

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from .models import EngineLock

ROUND_LOCK = "validation-round"


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


def _redis_lock(url: str, name: str, holder: str, ttl_s: float | None = None):
    """redis-py's Lock on the key, held by `holder` (its token) whichever process asks."""
    from redis.lock import Lock

    redis_lock = Lock(redis_client(url), _redis_key(name), timeout=ttl_s, thread_local=False)
    redis_lock.local.token = holder
    return redis_lock


def acquire(holder: str, *, name: str = ROUND_LOCK, ttl_s: float | None = None) -> bool:
    ttl_s = lock_ttl_s() if ttl_s is None else ttl_s
    url = settings.CAUTERWEB_LOCK_URL
    if url.startswith("redis"):
        return _redis_lock(url, name, holder, ttl_s).acquire(blocking=False, token=holder)
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
        from redis.exceptions import LockError

        try:
            return _redis_lock(url, name, holder, ttl_s).extend(ttl_s, replace_ttl=True)
        except LockError:  # expired, or taken by another holder since
            return False
    return (
        EngineLock.objects.filter(name=name, holder=holder).update(
            expires_at=timezone.now() + timedelta(seconds=ttl_s)
        )
        == 1
    )


def release(holder: str, *, name: str = ROUND_LOCK) -> None:
    url = settings.CAUTERWEB_LOCK_URL
    if url.startswith("redis"):
        from redis.exceptions import LockError

        with suppress(LockError):  # expired, or taken by another holder since: not ours
            _redis_lock(url, name, holder).release()
        return
    EngineLock.objects.filter(name=name, holder=holder).update(holder="", expires_at=None)
