"""Everyday equivalents: words a writer puts for one another when rewording a rule about
computers and work ("start" / "launch" / "boot", "fetch" / "download" / "pull", "folder" /
"directory"), which WordNet's frequent senses miss (semantics §12).

Not the lexicon's synonyms (`lexicon.SYNONYMS`), which excuse a swapped key term: a
group here is looser ("pull" is a download here and a merge in git; "boot" is a
restart and a shoe), so it is only a signal the model weighs, the share of changed words
with an equivalent among the other side's changed words, never a finding on its own.
Opposites never share a group (upload / download, start / stop, enable / disable).
"""

from __future__ import annotations

from functools import lru_cache

from .text import stem

# One group a line: words a rewording of the same rule puts for one another. Base forms;
# inflections are found by `_forms`.
_GROUPS = """
start launch boot begin initiate kick spin fire
restart reboot relaunch bounce cycle
stop halt terminate kill end abort cancel quit
pause suspend freeze hold
resume continue unpause
fetch download pull retrieve grab obtain get
upload push publish send post transmit submit
delete remove erase wipe purge drop discard clear destroy
clean tidy prune sweep
copy duplicate clone replicate mirror
move relocate transfer migrate shift
rename relabel retitle
create make generate produce build add
install deploy provision setup
uninstall unistall remove
update upgrade refresh bump patch
downgrade rollback revert roll undo restore
save store persist write record keep
load read open import ingest
check verify confirm validate inspect examine test ensure audit review
look search find locate scan grep query lookup
show display print output emit render list
log record note journal
warn alert notify flag signal page
ask prompt request query
allow permit let grant authorise enable
block deny forbid reject refuse prohibit bar prevent
fix repair correct resolve mend patch address remedy
break crash fail die abort bomb
error failure fault problem issue exception
slow sluggish laggy lagging slowly crawl unresponsive
fast quick rapid speedy swift
hang stall freeze stuck block
wait pause sleep delay hold defer
retry rerun reattempt repeat redo
limit cap ceiling maximum quota threshold bound
raise increase bump boost grow expand extend lengthen enlarge
lower decrease reduce cut shrink trim lessen halve
big large huge bigger larger oversized heavy
small little tiny smaller short
old stale outdated obsolete expired previous legacy
new fresh latest current recent newer
wrong incorrect invalid bad bogus mistaken
missing absent lacking gone lost
empty blank vacant bare
full complete entire whole
broken corrupt corrupted damaged faulty bad
folder directory dir path
file document doc
photo photos image picture pic snapshot
screenshot capture grab
password passphrase passcode pin secret
key token credential secret apikey
user account member login person
admin administrator root superuser operator
machine host server box node computer instance vm
laptop computer workstation desktop pc
phone mobile handset device smartphone
app application program software tool service
site website page webpage portal
setting settings option preference config configuration parameter
variable var env environment
command cmd instruction call invocation
script program routine job task
run execute invoke launch trigger
stop end finish complete done
message text note notice msg
mail email letter inbox
link url address href
network connection net link
internet online web
offline disconnected down unreachable
connect attach link join hook
disconnect detach unplug unlink
attach link connect bind mount
unmount detach eject
disk drive storage volume partition
memory ram
cpu processor core
crash outage downtime incident failure
backup snapshot copy archive dump
restore recover retrieve recreate
hide mask conceal obscure redact scrub blank obfuscate
remove strip scrub redact
encrypt encode cipher
label tag mark flag annotate
sort order arrange rank
group batch bundle chunk
split divide break partition shard
merge combine join unite consolidate
replace swap substitute exchange switch
choose pick select opt
turn switch toggle flip
skip omit bypass ignore drop
include add insert append attach
need require must demand
use employ utilise apply adopt
help assist aid support
tell inform notify advise
ask query request inquire
answer reply respond
fill populate complete
reset clear reinitialise wipe
empty flush drain purge clear
quickly immediately promptly instantly
later afterwards subsequently
before prior ahead earlier first
after following once then
often frequently regularly
always constantly consistently
never not
rule policy guideline standard convention
doctor physician clinician
customer client buyer purchaser shopper
buy purchase order
pay payment charge bill invoice
price cost fee rate charge
refund reimburse repay
car vehicle auto
shop store outlet
worker employee staff
boss manager supervisor lead
meeting call session sync
schedule calendar agenda timetable plan
deadline due cutoff
mistake error slip typo
draft sketch outline
picture image diagram figure chart
number count figure amount total quantity
step stage phase
speed rate pace throughput
size dimension length
stuck blocked jammed wedged frozen hung
leak drip seep
dirty soiled contaminated
room space area
"""

GROUPS: tuple[frozenset[str], ...] = tuple(
    frozenset(line.split()) for line in _GROUPS.strip().splitlines()
)


def _forms(word: str) -> set[str]:
    """The stems of a base form's regular inflections ("delete": "deleted" stems to
    "delet", "deleting" to "delet" as well; "stop": "stopped" to "stop")."""
    base = word[:-1] if word.endswith("e") else word
    forms = {word, word + "s", word + "es", base + "ed", base + "ing", word + "d"}
    if word.endswith("y") and len(word) > 3:
        forms |= {word[:-1] + "ies", word[:-1] + "ied"}
    return {stem(f) for f in forms}


def _index() -> dict[str, frozenset[int]]:
    found: dict[str, set[int]] = {}
    for n, group in enumerate(GROUPS):
        for word in group:
            for form in _forms(word) | {word}:
                found.setdefault(form, set()).add(n)
    return {k: frozenset(v) for k, v in found.items()}


_GROUPS_OF = _index()
_NONE: frozenset[int] = frozenset()


@lru_cache(maxsize=16384)
def groups_of(word: str) -> frozenset[int]:
    """The groups a word is in, whatever its inflection."""
    return _GROUPS_OF.get(word) or _GROUPS_OF.get(stem(word), _NONE)


def equivalent(a: str, b: str) -> bool:
    """Two different words a rewording puts for one another."""
    return a != b and bool(groups_of(a) & groups_of(b))


def paraphrase_share(gone: frozenset[str], came: frozenset[str]) -> float:
    """The share of changed words (those only one side has) with an everyday equivalent,
    or the same word inflected, among the other side's changed words: 1 when nothing
    changed, 0 when words were only added or only dropped."""
    if not gone and not came:
        return 1.0
    if not gone or not came:
        return 0.0
    # A word inflected on the other side ("shipping" / "shipped") is accounted for too.
    gone_groups = frozenset().union(*(groups_of(w) for w in gone))
    came_groups = frozenset().union(*(groups_of(w) for w in came))
    gone_stems, came_stems = {stem(w) for w in gone}, {stem(w) for w in came}
    matched = sum(bool(groups_of(w) & came_groups) or stem(w) in came_stems for w in gone)
    matched += sum(bool(groups_of(w) & gone_groups) or stem(w) in gone_stems for w in came)
    return matched / (len(gone) + len(came))
