"""Helpers the risk package's tests share."""

from learning.risk import suggest_risk
from learning.risk._lexicon import SEEDS

SEED_WORDS = {name.rsplit(".", 2)[0] for names in SEEDS.values() for name in names}


READS = [
    {"name": "catalogue.browse_items", "description": "Browse the items of a catalogue",
     "risk": "low"},
    {"name": "catalogue.show_item", "description": "Show one catalogue item", "risk": "low"},
    {"name": "records.show_record", "description": "Show one stored record", "risk": "low"},
]  # fmt: skip


def suggest(name, description="", produces=(), permissions=(), labelled=READS, lex=None):
    return suggest_risk(
        name=name,
        description=description,
        produces=list(produces),
        permissions=list(permissions),
        labelled=labelled,
        lex=lex,
    )


def floor_of(evidence):
    return next(item for item in evidence if item["kind"] == "rule")
