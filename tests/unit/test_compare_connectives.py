"""A directive's order and preference written in one shape before comparison (semantics
§12, docs/semantics.md#s12-1): "don't X until Y" and "only X after Y" read "Y before X";
"don't X; Y" and "rather than X, Y" read "Y instead of X"; any other shape stays as written
("Y; don't X" reads "Y instead of X" too: its act is refused either way).

Pure functions: no database, no Django settings needed.
"""

import pytest

from comparison.connectives import plain_order


@pytest.mark.parametrize(
    ("written", "plain"),
    [
        ("don't merge the branch until CI is green", "CI is green before merge the branch"),
        (
            "Never drop the column before the new code is live.",
            "the new code is live before drop the column",
        ),
        (
            "hold off on rotating the key until every client has the new one",
            "every client has the new one before rotating the key",
        ),
        (
            "do not call model.fit() until the data is loaded",
            "the data is loaded before call model.fit()",
        ),
        (
            "never drop the column before the new code is live, then vacuum the table",
            "the new code is live before drop the column, then vacuum the table",
        ),
        (
            "only restart the worker after the migration has finished",
            "the migration has finished before restart the worker",
        ),
        (
            "Only after the backup is verified should the agent drop the old table.",
            "the backup is verified before drop the old table",
        ),
        (
            "only once the lock is released, retry the job",
            "the lock is released before retry the job",
        ),
        (
            "promote the replica only once replication lag is zero",
            "replication lag is zero before promote the replica",
        ),
    ],
)
def test_a_step_that_waits_reads_after_the_step_it_waits_for(written, plain):
    assert plain_order(written) == plain


@pytest.mark.parametrize(
    ("written", "plain"),
    [
        (
            "rather than raising the timeout, add an index on user_id",
            "add an index on user_id instead of raising the timeout",
        ),
        (
            "instead of pinning the version, vendor the module",
            "vendor the module instead of pinning the version",
        ),
        (
            "do not raise the timeout; add an index on user_id",
            "add an index on user_id instead of raise the timeout",
        ),
        (
            "don't restart the pod, but raise its memory limit",
            "raise its memory limit instead of restart the pod",
        ),
        ("do not retry; it should fail fast", "fail fast instead of retry"),
        (
            "never rebuild the image; reuse the cached layer instead.",
            "reuse the cached layer instead of rebuild the image",
        ),
        (
            "raise its memory limit; don't restart the pod",
            "raise its memory limit instead of restart the pod",
        ),
        (
            "Reject those rows and report them. Do not create new SKUs.",
            "Reject those rows and report them instead of create new SKUs",
        ),
        (
            "take it out of service - don't try to clear it",
            "take it out of service instead of try to clear it",
        ),
    ],
)
def test_a_refused_option_reads_after_the_one_taken(written, plain):
    assert plain_order(written) == plain


@pytest.mark.parametrize(
    "written",
    [
        "restart the worker",
        "never force push to main",
        "do not retry, and raise the limit",
        "raise the limit, and never force push",
        "don't restart the pod. Raise the memory limit instead.",
        "use a line filter rather than a label",
        # "not" before a noun refuses no act.
        "pin the digest, not the tag",
        "check that the file really is HDF5, not a partial download",
        "",
    ],
)
def test_any_other_shape_stays_as_written(written):
    assert plain_order(written) == written


def test_the_shapes_of_one_order_read_alike():
    shapes = [
        "don't deploy until the smoke tests pass",
        "only deploy after the smoke tests pass",
        "deploy only once the smoke tests pass",
        "hold off on deploy until the smoke tests pass",
    ]
    assert {plain_order(s) for s in shapes} == {"the smoke tests pass before deploy"}


def test_the_shapes_of_one_preference_read_alike():
    shapes = [
        "rather than bumping the pool size, close the leaked connections",
        "don't bump the pool size; close the leaked connections",
        "close the leaked connections; don't bump the pool size",
        "never bump the pool size, but close the leaked connections",
    ]
    assert len({plain_order(s).replace("bumping", "bump") for s in shapes}) == 1


def test_the_first_connective_decides():
    # "until" first splits "don't merge" from "CI is green"; a later "until" is not tried.
    assert (
        plain_order("don't merge until CI is green until friday")
        == "CI is green until friday before merge"
    )


@pytest.mark.parametrize(
    "written",
    [
        "don't use an offset past 10000 - sort by id instead",
        "don't use an offset past 10000 \u2014 sort by id instead",
        "don't use an offset past 10000; sort by id instead",
    ],
)
def test_a_refusal_then_a_dash_or_a_full_stop_then_the_advice_is_one_shape(written):
    assert plain_order(written) == "sort by id instead of use an offset past 10000"
