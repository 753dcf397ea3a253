"""Risk suggestions: a level, how sure, and the evidence (pure: no Django, no network).

The rules are written once, in docs/learning.md (*Risk suggestions*). The package reads a
tool in phases, each a private module:

- ``_names``: the words of names and sentences (no lexicon);
- ``_wordnet`` and ``_lexicon``: the WordNet files, the seed senses and the reviewed verb
  lexicon (``learning/data/verbs.toml``) read together;
- ``_actions``: the tool's action word;
- ``_evidence``: the words of danger and where they were found;
- ``_hints``: the server author's declared hints;
- ``_reading``: the floor the words and hints set (rules 1–4);
- ``_labels``: what reviewers' labels say (rule 5);
- ``_suggest``: the suggestion, words first, then labels.
"""

from ._evidence import RiskEvidence
from ._labels import (
    RISK_ORDER,
    LabelIndex,
    PreparedLabel,
    label_read,
    prepare_labels,
)
from ._lexicon import VERBS_FILE, Lexicon, VocabularyInvalid, lexicon, vocabulary_load
from ._names import arguments_of
from ._suggest import suggest_risk
from ._wordnet import LexiconMissing, data_directory

__all__ = [
    "RISK_ORDER",
    "VERBS_FILE",
    "LabelIndex",
    "Lexicon",
    "LexiconMissing",
    "PreparedLabel",
    "RiskEvidence",
    "VocabularyInvalid",
    "arguments_of",
    "label_read",
    "data_directory",
    "lexicon",
    "prepare_labels",
    "suggest_risk",
    "vocabulary_load",
]
