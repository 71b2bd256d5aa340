"""What a round is configured with (semantics §16), read from settings once per round and
passed down as plain data, so every part of the round sees the same values."""

from dataclasses import dataclass
from typing import Any

from django.conf import settings

from . import engine
from .backends.http import HttpBackend
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
    max_repeats: int = 8
    alpha: float = 0.05
    looks_per_round: int = 1

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
            max_repeats=settings.CAUTERWEB_REPLAY_MAX_REPEATS,
            alpha=settings.CAUTERWEB_REPLAY_ALPHA,
            looks_per_round=settings.CAUTERWEB_REPLAY_LOOKS_PER_ROUND,
        )


def load_backend(setting: str) -> Any:
    """The configured replay backend (semantics §14), or None: forward trials only."""
    if not setting:
        return None
    if setting.startswith(("http://", "https://")):
        return HttpBackend(setting)
    return load_callable(setting)
