"""What a round is configured with (semantics §16), read from settings once per round and
passed down as plain data, so every part of the round sees the same values."""

from dataclasses import dataclass
from functools import cache
from typing import Any

from django.conf import settings

from . import engine
from .backends.python import load_callable

PAIRED = "paired"
SINGLE = "single"


@dataclass(frozen=True)
class RoundConfig:
    margins: engine.Margins
    min_sessions: int
    max_failing: int
    max_wins: int
    max_attempts: int
    replay_timeout_s: float
    env_wait_timeout_s: float
    budget_s: float
    backend: Any
    verifier: Any
    design: str = SINGLE
    concurrency: int = 1
    batch: int = 8  # replays per Celery replay task at most (docs/semantics.md#s18-batches)
    max_repeats: int = 10
    alpha: float = 0.05
    looks_per_round: int = 1
    futility_beta: float | None = 0.02  # None: the sign boundary (paired.PairedConfig)

    @property
    def replay_wired(self) -> bool:
        return self.backend is not None

    @property
    def remote(self) -> bool:
        """A harness in another process: its reads and started signal land in the database."""
        return bool(getattr(self.backend, "remote_reads", False))

    @classmethod
    def from_settings(cls) -> "RoundConfig":
        return cls(
            margins=engine.Margins(
                promote=settings.CAUTERWEB_RULE_PROMOTE_MARGIN,
                regress=settings.CAUTERWEB_RULE_REGRESS_MARGIN,
            ),
            min_sessions=settings.CAUTERWEB_RULE_TRIAL_MIN_SESSIONS,
            max_failing=settings.CAUTERWEB_MAX_FAILING_CASES,
            max_wins=settings.CAUTERWEB_MAX_PROTECTED_WINS,
            max_attempts=settings.CAUTERWEB_MAX_REPLAY_ATTEMPTS,
            replay_timeout_s=settings.CAUTERWEB_REPLAY_TIMEOUT_S,
            env_wait_timeout_s=settings.CAUTERWEB_REPLAY_ENV_WAIT_TIMEOUT_S,
            budget_s=settings.CAUTERWEB_VALIDATION_ROUND_BUDGET_S,
            backend=load_backend(settings.CAUTERWEB_REPLAY_BACKEND),
            verifier=load_callable(settings.CAUTERWEB_VERIFIER)
            if settings.CAUTERWEB_VERIFIER
            else None,
            design=settings.CAUTERWEB_REPLAY_DESIGN,
            concurrency=settings.CAUTERWEB_REPLAY_CONCURRENCY,
            batch=settings.CAUTERWEB_REPLAY_BATCH,
            max_repeats=settings.CAUTERWEB_REPLAY_MAX_REPEATS,
            alpha=settings.CAUTERWEB_REPLAY_ALPHA,
            looks_per_round=settings.CAUTERWEB_REPLAY_LOOKS_PER_ROUND,
            futility_beta=settings.CAUTERWEB_REPLAY_FUTILITY_BETA or None,
        )


def load_backend(setting: str) -> Any:
    """The configured replay backend (semantics §14), or None: forward trials only. A Python
    backend that cannot be imported is an `UnimportableBackend`: the round runs and each of
    its replays ends at once, `inconclusive` with the import's error as its reason."""
    if not setting:
        return None
    if setting.startswith(("http://", "https://")):
        from .backends.http import HttpBackend  # and requests, only for a remote harness

        return HttpBackend(setting)
    return _python_backend(setting)


@cache
def _python_backend(setting: str) -> Any:
    # Settings checked the path's form at start-up, not that it imports: a worker deployed
    # without the harness's package, or a harness whose own import fails, is found here. The
    # failure is kept like a success, so a module that fails late in its import is not run
    # again by every replay.
    try:
        return load_callable(setting)
    except Exception as exc:
        return UnimportableBackend(setting, exc)


class BackendUnavailable(Exception):
    """The replay backend could not be imported in this process."""


class UnimportableBackend:
    """Stands for a backend whose import failed: each call raises, at once, the reason."""

    def __init__(self, setting: str, exc: Exception):
        self.reason = (
            f"the replay backend {setting} could not be imported: {type(exc).__name__}: {exc}"
        )

    def __call__(self, case, context):
        raise BackendUnavailable(self.reason)
