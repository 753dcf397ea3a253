"""The suggestion as the rest of the service sees it (``learning.risk.suggest_risk``)."""

import pytest
from django.apps import apps

from learning.aggregates import new_aggregate
from learning.inference import infer_contract
from learning.risk import VocabularyInvalid, lexicon
from learning.selectors import risk_lexicon
from learning.services import _risk_suggestion
from learning.tests.risk import READS


def test_the_inferred_contract_carries_the_risk_evidence():
    document = infer_contract(
        name="disk.wipe", description="Wipe a disk", input_schema=None, aggregate=new_aggregate(),
        labelled=READS,
    )  # fmt: skip
    assert document["risk"] == "high"
    assert document["evidence"]["risk"][0]["word"] == "wipe"


@pytest.mark.django_db
def test_the_operator_lexicon_setting_reaches_the_services_suggestions(settings, tmp_path):
    extra = tmp_path / "verbs.toml"
    extra.write_text('[money]\nreason = "moves credits"\nwords = ["zorble"]\n')
    assert risk_lexicon() is lexicon()
    settings.RISK_VERBS_FILE = str(extra)
    assert risk_lexicon() is lexicon(extra)
    risk, document = _risk_suggestion(name="credits.zorble_points", produces=[], gated=[],
                                      labelled=[])  # fmt: skip
    assert risk == "high"
    assert any("moves credits" in item.get("via", "") for item in document["evidence"])


def test_a_bad_operator_lexicon_stops_start_up(settings, tmp_path):
    extra = tmp_path / "verbs.toml"
    extra.write_text("[money\n")
    settings.RISK_VERBS_FILE = str(extra)
    with pytest.raises(VocabularyInvalid, match=r"verbs\.toml"):
        apps.get_app_config("learning").ready()
