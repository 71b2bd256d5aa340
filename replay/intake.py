"""Report intake (semantics §2, §8): the lifecycle stores the reports, and in the same
transaction the engine enrols their sessions in the forward trials of every candidate in
force — explicitly, here, so the most important write of a report is in plain sight. The round
the reports ask for is kicked after commit (through `lifecycle.signals`)."""

from datetime import datetime

from django.db import transaction
from django.utils import timezone

from lifecycle.services.reports import reports_store
from lifecycle.validation import ImportResult

from .trials import trial_enrol


def reports_ingest(rows, *, actor: str = "harness", now: datetime | None = None) -> ImportResult:
    """Store reports and enrol their sessions in the trials, all or nothing."""
    now = now or timezone.now()
    with transaction.atomic():
        result, touched = reports_store(rows, actor=actor, now=now)
        trial_enrol(reports=touched, now=now)
    return result
