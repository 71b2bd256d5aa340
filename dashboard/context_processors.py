"""What every page's frame shows: how many items wait in the review queue (the navigation's
count), read once per page and only for a signed-in user."""

from django.utils.functional import SimpleLazyObject

from lifecycle.selectors.review import review_counts


def counts_with_total() -> dict[str, int]:
    counts = review_counts()
    return {**counts, "total": sum(counts.values())}


def review(request) -> dict:
    if not request.user.is_authenticated:
        return {}
    return {"review_counts": SimpleLazyObject(counts_with_total)}
