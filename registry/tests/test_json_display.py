import json

from registry.json_display import MAX_SHOWN_DEPTH, bounded, json_text, stored_json_text


def deep(depth: int) -> dict:
    value: dict = {"leaf": "bottom"}
    for level in range(depth):
        value = {f"level{level}": value} if level % 2 else {"list": [value]}
    return value


def test_it_shows_any_depth_down_to_its_limit_and_a_marker_below():
    text = json_text(deep(5000))
    shown = json.loads(text)
    levels = 0
    while isinstance(shown, (dict, list)):
        shown = next(iter(shown.values())) if isinstance(shown, dict) else shown[0]
        levels += 1
    assert levels == MAX_SHOWN_DEPTH
    assert shown.startswith("… deeper levels not shown")


def test_it_keeps_shallow_values_and_their_key_order():
    value = {"b": [1, {"c": None, "a": "x"}], "a": True}
    assert bounded(value) == value
    assert list(bounded(value)) == ["b", "a"]
    assert json_text(value) == json.dumps(value, indent=2, ensure_ascii=False)


def test_it_shows_stored_text_python_cannot_parse_as_stored():
    text = "[" * 100_000 + "]" * 100_000
    assert stored_json_text(text) == text
    assert stored_json_text(None) == "null"
    assert stored_json_text('{"a": [1]}') == '{\n  "a": [\n    1\n  ]\n}'
