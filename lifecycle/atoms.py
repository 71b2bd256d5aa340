"""Signature atoms (semantics §1, §11): `key:value` strings compared as atoms, never as prose."""

import re

NOTICE_KEYS = frozenset({"breach", "stall", "regression"})
_ATOM = re.compile(r"^[a-z][a-z0-9_.-]*:\S(?:.*\S)?$")


class BadAtom(ValueError):
    pass


def parse_atom(raw: object) -> str:
    """Normalise and check one atom; raises BadAtom with a message fit for an error report."""
    if not isinstance(raw, str):
        raise BadAtom(f"atom must be a string like 'error:non_fast_forward', got {raw!r}")
    atom = raw.strip()
    key, _, value = atom.partition(":")
    atom = f"{key.lower()}:{value.strip()}"
    if len(atom) > 255 or not _ATOM.match(atom):
        raise BadAtom(f"{raw!r} is not an atom of the form key:value (e.g. 'tool:git')")
    return atom


def parse_atoms(raw: object, *, notices_only: bool = False) -> list[str]:
    """A list of atoms, deduplicated in order. `notices_only` requires breach/stall/regression."""
    if not isinstance(raw, list):
        raise BadAtom("must be a list of 'key:value' strings")
    seen: dict[str, None] = {}
    for item in raw:
        atom = parse_atom(item)
        if notices_only and atom_key(atom) not in NOTICE_KEYS:
            raise BadAtom(f"{atom!r} is not a notice (breach:, stall: or regression: a metric)")
        seen[atom] = None
    return list(seen)


def atom_key(atom: str) -> str:
    return atom.partition(":")[0]


def atom_value(atom: str) -> str:
    return atom.partition(":")[2]


def is_notice(atom: str) -> bool:
    return atom_key(atom) in NOTICE_KEYS


def failure_mode_atoms(atoms) -> frozenset[str]:
    """Every non-notice atom: `tool:`, `action:`, `error:` and any other key."""
    return frozenset(a for a in atoms if not is_notice(a))


def notice_atoms(atoms) -> frozenset[str]:
    return frozenset(a for a in atoms if is_notice(a))


def notice_metric(atom: str) -> str:
    return atom_value(atom) if is_notice(atom) else ""


def family_notice_atoms(family: set[str] | frozenset[str]) -> frozenset[str]:
    """The notice atoms that hit a metric family: any of breach:/stall:/regression: on it."""
    return frozenset(f"{key}:{metric}" for key in NOTICE_KEYS for metric in family)
