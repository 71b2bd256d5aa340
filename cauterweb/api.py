"""The one NinjaAPI of the project, versioned under /api/v1; each app adds its routers here."""

from ninja import NinjaAPI

api = NinjaAPI(
    title="CauterWeb API",
    version="1",
    description="Corpus, reports, candidates, the rule tool, rounds, journal and packs.",
    urls_namespace="api-v1",
)
