"""The WordNet reader (``learning.risk._wordnet``): synsets, base forms, bounded misses."""

from learning.risk import lexicon
from learning.risk._wordnet import MISSING_BOUND, wordnet
from learning.tests.risk import suggest


def test_the_reader_finds_synsets_in_files_with_rewritten_line_ends():
    wn = wordnet()
    delete = wn.synset(wn.senses("delete")[0], "v")
    assert delete.words == ("delete", "cancel")
    assert wn.base_forms("sent", "v")[:2] == ["sent", "send"]
    assert wn.senses("no-such-verb") == ()


def test_made_up_words_do_not_grow_the_lexicon():
    lex = lexicon()
    wn = lex.wordnet
    before = len(lex._words), len(wn._index)
    for index in range(MISSING_BOUND + 50):
        suggest(f"junk.qz{index}x_qv{index}", f"Qz{index}x the thing.", labelled=[])
    assert (len(lex._words), len(wn._index)) == before
    assert len(wn._missing) <= MISSING_BOUND
