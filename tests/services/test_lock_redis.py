"""The round lock on Redis (replay/lock.py, redis-py's Lock): one holder at a time; only the
holder extends or releases it; an expired lock is anyone's, under a newer fencing token
(docs/semantics.md#s9-1-lease)."""

import time

import pytest
from django.conf import settings

from replay import lock

# The fencing token of every acquisition comes from the EngineLock row.
pytestmark = [pytest.mark.redis, pytest.mark.django_db]


@pytest.fixture
def redis_lock(settings):
    settings.CAUTERWEB_LOCK_URL = settings.CELERY_BROKER_URL
    name = f"test-{time.monotonic_ns()}"
    yield name
    lock.redis_client(settings.CAUTERWEB_LOCK_URL).delete(lock._redis_key(name))


def test_one_holder_at_a_time_and_only_the_holder_extends_or_releases(redis_lock):
    first = lock.acquire("a", name=redis_lock, ttl_s=5)
    assert first
    assert not lock.acquire("b", name=redis_lock, ttl_s=5)
    assert lock.extend("a", name=redis_lock, ttl_s=5)
    assert not lock.extend("b", name=redis_lock, ttl_s=5)
    lock.release("b", name=redis_lock)  # not b's: nothing happens
    assert not lock.acquire("b", name=redis_lock, ttl_s=5)
    lock.release("a", name=redis_lock)
    assert lock.acquire("b", name=redis_lock, ttl_s=5) > first
    assert settings.CAUTERWEB_LOCK_URL.startswith("redis")


def test_an_expired_lock_is_taken_by_another_and_cannot_be_extended_by_its_old_holder(redis_lock):
    first = lock.acquire("a", name=redis_lock, ttl_s=0.2)
    key = lock._redis_key(redis_lock)
    lock.redis_client(settings.CAUTERWEB_LOCK_URL).pexpire(key, 1)
    time.sleep(0.05)
    assert lock.acquire("b", name=redis_lock, ttl_s=5) > first
    assert not lock.extend("a", name=redis_lock, ttl_s=5)
    lock.release("a", name=redis_lock)
    assert lock.redis_client(settings.CAUTERWEB_LOCK_URL).get(key) == b"b"
