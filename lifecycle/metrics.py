"""The metric registry (SPEC §1): read from its table into plain data for the engine."""

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

    return Registry(
        {
            m.name: MetricInfo(m.name, m.tier, m.higher_is_better, tuple(m.aliases))
            for m in MetricDefinition.objects.all()
        }
    )
