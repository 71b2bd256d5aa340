"""The single-flight round lock (semantics §9.1) as a lease (docs/semantics.md#s9-1-lease): at
most one round at a time across all workers, held for a short time and renewed by a heartbeat
while its round runs, so a dead holder's lock is taken over within seconds, not minutes.

Two flavours, one interface:
- Redis, when `CAUTERWEB_LOCK_URL` is a Redis URL: redis-py's own `Lock` (its compare-and-act
  steps are the library's, none written here), with a TTL of `LOCK_TTL_S`. A lock is never
  carried across a Redis restart for longer than that TTL.
- Otherwise the EngineLock row, claimed by a conditional UPDATE — 0 rows updated means someone
  else holds it.

Either way every acquisition takes the next fencing token from the EngineLock row in the
database (`fence`). A round writes its verdicts only while the row still carries its token
(`fenced`), in the same transaction: a holder that lost its lease without knowing it (paused,
cut off, its Redis restarted and the lock taken by another) writes nothing.
"""

import logging
import secrets
import threading
import time
from contextlib import suppress
from datetime import timedelta
from functools import cache

from django.db import DatabaseError, IntegrityError, connection, connections, transaction
from django.db.models import F, Q
from django.utils import timezone

from .models import EngineLock

logger = logging.getLogger(__name__)

ROUND_LOCK = "validation-round"
# A lock lives this long unless its holder renews it; the heartbeat renews it three times
# a period, so two missed beats in a row still keep it.
LOCK_TTL_S = 10.0
# Every call to Redis for the lock gives up after this long (a hung Redis never hangs a round
# or a request; the heartbeat tries again).
REDIS_TIMEOUT_S = 2.0


class LockLost(Exception):
    """The round lock expired and another worker took it (or may have): this round must stop."""


def lock_ttl_s() -> float:
    """How long a lock outlives its holder's last heartbeat."""
    return LOCK_TTL_S


def new_holder() -> str:
    return secrets.token_hex(8)


@cache
def redis_client(url: str):
    """One client (and its connection pool) per URL and process; no call waits on Redis
    longer than REDIS_TIMEOUT_S."""
    import redis

    return redis.Redis.from_url(
        url,
        socket_timeout=REDIS_TIMEOUT_S,
        socket_connect_timeout=REDIS_TIMEOUT_S,
        health_check_interval=30,
    )


def _redis_key(name: str) -> str:
    return f"cauterweb:lock:{name}"


def _url() -> str:
    from django.conf import settings

    return settings.CAUTERWEB_LOCK_URL


def _redis_lock(holder: str, name: str, ttl_s: float):
    """redis-py's Lock for this holder: its token is the holder, so any process that knows the
    holder can renew or release it, and no other."""
    from redis.lock import Lock

    held = Lock(
        redis_client(_url()),
        _redis_key(name),
        timeout=ttl_s,
        blocking=False,
        thread_local=False,
        raise_on_release_error=False,
    )
    held.local.token = holder.encode()
    return held


def _row(name: str) -> None:
    if not EngineLock.objects.filter(name=name).exists():
        try:
            with transaction.atomic():
                EngineLock.objects.create(name=name)
        except IntegrityError:
            pass  # another worker created the row a moment ago


def acquire(holder: str, *, name: str = ROUND_LOCK, ttl_s: float | None = None) -> int | None:
    """Take the lock; its fencing token (a positive number), or None if someone holds it."""
    ttl_s = lock_ttl_s() if ttl_s is None else ttl_s
    _row(name)
    mine = EngineLock.objects.filter(name=name)
    if _url().startswith("redis"):
        if not _redis_lock(holder, name, max(ttl_s, 0.001)).acquire(token=holder):
            return None
        claimed = mine.update(fence=F("fence") + 1)
    else:
        now = timezone.now()
        claimed = mine.filter(Q(holder="") | Q(expires_at__lt=now) | Q(expires_at__isnull=True))
        claimed = claimed.update(
            holder=holder, expires_at=now + timedelta(seconds=ttl_s), fence=F("fence") + 1
        )
    if claimed != 1:
        return None
    return mine.values_list("fence", flat=True).get()


def extend(holder: str, *, name: str = ROUND_LOCK, ttl_s: float | None = None) -> bool:
    """Push the expiry out; False if the lock expired (and someone else may hold it)."""
    ttl_s = lock_ttl_s() if ttl_s is None else ttl_s
    if _url().startswith("redis"):
        from redis.exceptions import LockError

        try:
            return bool(_redis_lock(holder, name, ttl_s).extend(ttl_s, replace_ttl=True))
        except LockError:
            return False
    return (
        EngineLock.objects.filter(name=name, holder=holder).update(
            expires_at=timezone.now() + timedelta(seconds=ttl_s)
        )
        == 1
    )


def release(holder: str, *, name: str = ROUND_LOCK) -> None:
    if _url().startswith("redis"):
        from redis.exceptions import LockError

        # Expired, or taken by another holder since: not ours to release (redis-py raises
        # LockNotOwnedError here whatever raise_on_release_error says).
        with suppress(LockError):
            _redis_lock(holder, name, lock_ttl_s()).release()
        return
    EngineLock.objects.filter(name=name, holder=holder).update(holder="", expires_at=None)


def fence_holds(fence: int, *, name: str = ROUND_LOCK) -> bool:
    return EngineLock.objects.filter(name=name, fence=fence).exists()


def fenced(fence: int | None, *, name: str = ROUND_LOCK) -> None:
    """Inside a write's transaction: raise LockLost unless the lock's fencing token is still
    `fence`. The row is locked until the write commits, so a new holder's acquisition (which
    takes the next token) waits for it instead of interleaving."""
    if fence is None:
        return
    held = EngineLock.objects.select_for_update().filter(name=name, fence=fence).exists()
    if not held:
        raise LockLost(f"the round lock was taken over (fencing token {fence} is stale)")


class Lease:
    """A held round lock, renewed every third of its TTL while its round runs: by a heartbeat
    thread of its own (`threaded`), or by the round's own thread at `check` (on SQLite and
    inside a caller's transaction, whose rows another connection cannot see; the round wakes
    often enough). A renewal that finds the lock gone takes it again if nobody took it
    meanwhile (the fencing token is still this lease's: a Redis that paused past the TTL, or
    restarted); otherwise, or when no renewal succeeded for a whole TTL, the lease is `lost`
    and the round stops at its next check."""

    def __init__(self, holder: str, fence: int, *, name: str = ROUND_LOCK, threaded: bool = True):
        self.holder, self.fence, self.name, self.threaded = holder, fence, name, threaded
        self.on_beat = None  # called after each renewal (the round's liveness, for people)
        self.lost = threading.Event()
        self.why = ""
        self._stop = threading.Event()
        self._renewed = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="round-lease", daemon=True)

    def start(self) -> "Lease":
        if self.threaded:
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=REDIS_TIMEOUT_S * 3)

    def check(self) -> None:
        """Raise LockLost if the lease is gone; renew it here when there is no thread."""
        if not self.threaded and time.monotonic() - self._renewed > lock_ttl_s() / 3:
            self._beat()
        if self.lost.is_set():
            raise LockLost(self.why)

    def _run(self) -> None:
        try:
            while not self._stop.wait(lock_ttl_s() / 3) and not self.lost.is_set():
                self._beat()
        finally:
            connections.close_all()

    def _beat(self) -> None:
        try:
            renewed = self._renew()
        except Exception as exc:  # Redis or the database unreachable a moment
            logger.warning("round lock %s: renewal failed (%s)", self.fence, exc)
            if self.threaded:
                connection.close()  # this thread's; the next beat opens a fresh one
            renewed = None
        if renewed:
            self._renewed = time.monotonic()
            self._beat_hook()
        elif renewed is False:
            self._lose("the round lock expired and another worker holds it")
        elif time.monotonic() - self._renewed > lock_ttl_s():
            self._lose("the round lock could not be renewed for a whole lease period")

    def _renew(self) -> bool:
        if extend(self.holder, name=self.name):
            return True
        # Gone: expired while Redis was paused, or lost with a Redis restart. Ours again only
        # if no one acquired it meanwhile, which would have taken the next fencing token.
        if not _url().startswith("redis") or not fence_holds(self.fence, name=self.name):
            return False
        again = _redis_lock(self.holder, self.name, lock_ttl_s())
        if not again.acquire(token=self.holder):
            return False
        if fence_holds(self.fence, name=self.name):
            logger.warning("round lock %s: expired unseen; taken again", self.fence)
            return True
        again.release()
        return False

    def _beat_hook(self) -> None:
        if self.on_beat is None:
            return
        try:
            self.on_beat()
        except DatabaseError:
            logger.info("round lock %s: liveness not recorded this time", self.fence)
            if self.threaded:
                connection.close()

    def _lose(self, why: str) -> None:
        self.why = why
        logger.error("round lock %s lost: %s", self.fence, why)
        self.lost.set()
