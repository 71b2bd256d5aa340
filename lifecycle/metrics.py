"""The metric registry (semantics §1): read from its table into plain data for the engine."""

import time
from dataclasses import dataclass, field


@dataclass(frozen=True)
class MetricInfo:
    name: str
    tier: int
    higher_is_better: bool = True
    aliases: tuple[str, ...] = field(default_factory=tuple)


class Registry(dict[str, MetricInfo]):
    """name → MetricInfo, with alias lookups. Built once per round or request."""

    def resolve(self, name: str) -> MetricInfo | None:
        if name in self:
            return self[name]
        for info in self.values():
            if name in info.aliases:
                return info
        return None

    def family(self, name: str) -> frozenset[str]:
        """The metric plus its aliases; an unknown metric is a family of one."""
        if not name:
            return frozenset()
        info = self.resolve(name)
        if info is None:
            return frozenset({name})
        return frozenset({info.name, *info.aliases})


def load_registry() -> Registry:
    from .models import MetricDefinition

    # Plain values, not model instances: every report's enrolment reads the whole registry.
    fields = ("name", "tier", "higher_is_better", "aliases")
    return Registry(
        {
            name: MetricInfo(name, tier, higher_is_better, tuple(aliases))
            for name, tier, higher_is_better, aliases in MetricDefinition.objects.values_list(
                *fields
            )
        }
    )


# Report intake reads the registry for every report, and it changes only when metrics are seeded
# (at migrate): a process keeps what it read for this many seconds (`current_registry`).
REGISTRY_SECONDS = 30.0
_kept: dict[str, tuple[float, Registry]] = {}


def current_registry() -> Registry:
    """The registry as read at most `REGISTRY_SECONDS` ago by this process: for the per-report
    path, where a read of the table would be one more round trip each time."""
    now = time.monotonic()
    kept = _kept.get("registry")
    if kept is None or now >= kept[0]:
        kept = _kept["registry"] = (now + REGISTRY_SECONDS, load_registry())
    return kept[1]


def forget_registry() -> None:
    """The next `current_registry` reads the table again."""
    _kept.clear()


def families_sql() -> str:
    """A SELECT of every name in the families of the metrics given as one text[] parameter,
    resolved as `Registry.family` resolves each — the registry entry of that name, else the
    first in (tier, name) order holding it as an alias, else a family of the name alone — for
    a PostgreSQL statement that reads the registry itself instead of a round trip before it."""
    from .models import MetricDefinition

    table = MetricDefinition._meta.db_table
    return (
        "SELECT coalesce(f.name, n.metric) AS name FROM unnest(%s::text[]) AS n(metric) "
        f"LEFT JOIN LATERAL (SELECT d.name, d.aliases FROM {table} d "
        "WHERE d.name = n.metric OR d.aliases @> jsonb_build_array(n.metric) "
        "ORDER BY d.name = n.metric DESC, d.tier, d.name LIMIT 1) d ON TRUE "
        "LEFT JOIN LATERAL (SELECT d.name UNION ALL SELECT jsonb_array_elements_text(d.aliases)) "
        "AS f(name) ON d.name IS NOT NULL "
        "WHERE n.metric <> ''"
    )


def seed_default_metrics(model, *, using: str = "default") -> None:
    """Insert the registry of settings.CAUTERWEB_DEFAULT_METRICS where missing (semantics §1)."""
    from django.conf import settings

    forget_registry()
    for name, tier, higher_is_better, aliases in settings.CAUTERWEB_DEFAULT_METRICS:
        model.objects.using(using).get_or_create(
            name=name,
            defaults={"tier": tier, "higher_is_better": higher_is_better, "aliases": aliases},
        )
