"""The lexicon (``learning.risk._lexicon``): seeds grown through WordNet, the reviewed verb
lexicon and an operator's file over it."""

import socket

import pytest

from learning.risk import VERBS_FILE, VocabularyInvalid, lexicon, vocabulary_load
from learning.risk._lexicon import lexicon_build
from learning.risk._wordnet import WordNet, data_directory
from learning.tests.risk import SEED_WORDS, suggest


@pytest.mark.parametrize(
    ("name", "word"),
    [("records.efface", "efface"), ("records.nullify", "nullify"), ("deals.rescind", "rescind")],
)
def test_a_synonym_outside_the_seeds_and_the_lexicon_is_high_with_read_neighbours(name, word):
    assert word not in SEED_WORDS and lexicon().entry(word) is None
    risk, _, evidence = suggest(name, f"{word.capitalize()} the thing")
    assert risk == "high"
    verb = next(item for item in evidence if item["kind"] == "verb")
    assert verb["word"] == word and verb["class"] == "destructive"
    assert "WordNet" in verb["via"]


def test_the_lexicon_loads_with_the_network_disabled(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the lexicon tried to use the network")

    monkeypatch.setattr(socket, "socket", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    lexicon = lexicon_build(WordNet(data_directory()))
    assert "destructive" in {sense.danger for sense in lexicon.verbs["wipe"]}
    assert "money" in {sense.danger for sense in lexicon.nouns["payment"]}


def test_a_change_is_read_through_the_hypernym_chain():
    _, _, evidence = suggest("things.scrunch_item", "Scrunch an item.")
    action = next(item for item in evidence if item["kind"] == "action")
    assert "scrunch" in action["via"] and "change" in action["via"]


@pytest.mark.parametrize(
    ("name", "word", "danger"),
    [("treasury.indemnify_claim", "indemnify", "money"),
     ("people.defray_cost", "defray", "money"),
     ("vendors.recompense_vendor", "recompense", "money"),
     ("stock.writeoff_item", "writeoff", "destructive"),
     ("people.empower_user", "empower", "permissions")],
)  # fmt: skip
def test_synonyms_and_kinds_of_dangerous_verbs_are_high(name, word, danger):
    assert word not in SEED_WORDS
    risk, _, evidence = suggest(name, "")
    assert risk == "high"
    found = {(item["word"], item["class"]) for item in evidence if item["kind"] == "verb"}
    assert (word, danger) in found  # "remit" is also a kind of cancelling (of a debt)


def test_a_kind_of_payment_two_levels_down_shows_its_chain():
    _, _, evidence = suggest("treasury.restitute_deposit", "")
    verb = next(item for item in evidence if item["kind"] == "verb")
    assert "refund" in verb["via"] and "pay" in verb["via"]


def test_the_verb_lexicon_has_a_reason_for_every_group_and_operators_extend_it(tmp_path):
    vocabulary = vocabulary_load(VERBS_FILE)
    assert all(entry.reason for entry in vocabulary.words.values())
    assert vocabulary.words["delete"].danger == "destructive"
    assert vocabulary.words["get"].group == "read"
    extra = tmp_path / "verbs.toml"
    extra.write_text('[destructive]\nreason = "our policy"\nwords = ["archive", "zorble"]\n')
    combined = vocabulary_load(VERBS_FILE, extra)
    assert combined.words["archive"].danger == "destructive"  # replaces "change"
    assert combined.words["zorble"].reason == "our policy"
    extra.write_text('[dangerous]\nwords = ["x"]\n')
    with pytest.raises(VocabularyInvalid, match=r"verbs\.toml: unknown group \[dangerous\]"):
        vocabulary_load(extra)
    extra.write_text("[read\n")
    with pytest.raises(VocabularyInvalid, match=r"verbs\.toml"):
        vocabulary_load(extra)


def test_an_operator_lexicon_changes_suggestions(tmp_path):
    extra = tmp_path / "verbs.toml"
    extra.write_text('[money]\nreason = "moves credits"\nwords = ["zorble"]\n')
    risk, _, evidence = suggest("credits.zorble_points", "", lex=lexicon(extra))
    assert risk == "high"
    assert "moves credits" in next(i for i in evidence if i["kind"] == "verb")["via"]
    assert lexicon(extra) is lexicon(extra)  # built once per file
    assert suggest("credits.zorble_points", "").risk == "medium"  # the reviewed lexicon alone


@pytest.mark.parametrize("word", ["transfer", "directory", "balance", "status"])
def test_a_word_that_is_a_verb_or_names_no_act_is_not_nominalised(word):
    assert lexicon().nominalised(word) is None
