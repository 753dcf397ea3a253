"""The demo registry file is consistent: vocabulary, contracts, invariants, applications.

Pure: reads demo/registry.json; no database. ``load_demo`` and the end-to-end tests
import this file, so a broken reference here would break them in a less readable way.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from registry.validation import RegistryContext, contract_check, policy_errors

RISKS = {"low", "medium", "high"}
PERMISSIONS = {"read", "write", "delete", "send", "external_api", "read_web", "payments", "admin"}
NORMALIZERS = {"bool", "int", "float", "str", "lower", "strip", "json"}
ACTIONS = {"reject", "correct", "drop"}
MERGE_RULES = {"replace", "append", "merge_dict"}


@pytest.fixture(scope="module")
def variables(demo_file: dict) -> set[str]:
    return {variable["name"] for variable in demo_file["state_variables"]}


def refs(node: Any) -> Iterator[str]:
    if isinstance(node, Mapping):
        for key, value in node.items():
            if key in ("$ref", "$dynamicRef"):
                yield value
            else:
                yield from refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from refs(item)


def check_config_params(entries: list, where: str) -> None:
    assert isinstance(entries, list), where
    keys = [entry["key"] for entry in entries]
    assert len(keys) == len(set(keys)), where
    for entry in entries:
        assert set(entry) <= {"key", "default", "normalizer", "description"}, where
        assert isinstance(entry["key"], str) and entry["key"] and "default" in entry, where
        assert entry.get("normalizer", "str") in NORMALIZERS, where


def test_it_has_enough_tools_across_domains_and_every_risk(demo_file, demo_tools):
    assert len(demo_file["tools"]) == len(demo_tools) >= 34  # names are unique
    assert {tool["risk"] for tool in demo_tools.values()} == RISKS
    domains = {name.split(".")[0] for name in demo_tools if "." in name}
    assert {"calendar", "mail", "documents", "payments", "web", "access"} <= domains
    assert {"retrieval_llm", "source_link_retrieval"} <= set(demo_tools)
    for name in (
        "payments.refund_charge", "payments.charge_card", "calendar.delete_event",
        "access.grant_role", "access.revoke_role", "access.reset_password",
    ):  # fmt: skip
        assert demo_tools[name]["risk"] == "high", name


def test_the_vocabulary_has_unique_aliases_that_never_shadow_a_name(demo_file, variables):
    assert len(variables) == len(demo_file["state_variables"]) >= 40
    aliases = Counter(
        alias for variable in demo_file["state_variables"] for alias in variable.get("aliases", [])
    )
    assert max(aliases.values()) == 1
    assert not set(aliases) & variables
    for variable in demo_file["state_variables"]:
        assert variable["description"].strip(), variable["name"]
    assert {"eventId", "evt_id", "messageId"} <= set(aliases)


def test_contracts_name_declared_variables_only(demo_tools, variables):
    used = set()
    for name, tool in demo_tools.items():
        assert tool["requires"] or tool["produces"], name
        for field in ("requires", "produces"):
            assert set(tool[field]) <= variables, (name, field)
            assert len(tool[field]) == len(set(tool[field])), (name, field)
            used |= set(tool[field])
        for variable, meta in tool.get("effects", {}).items():
            assert variable in tool["produces"], (name, variable)
            assert set(meta) <= {"merge", "preserve_across_turns", "prompt_template_var"}
            assert meta["merge"] in MERGE_RULES
            assert isinstance(meta["preserve_across_turns"], bool)
            assert meta["prompt_template_var"] is None or isinstance(
                meta["prompt_template_var"], str
            )
    assert sum(1 for tool in demo_tools.values() if tool.get("effects")) >= 3
    # the drift in the demo traces introduces these: declared, but in no contract yet
    assert {"approval_code", "refund_receipt_url"} <= variables - used


def test_state_fed_arguments_are_named_like_their_variable(demo_tools):
    # Data flow is visible in traces when the argument carries the variable's name; the
    # exceptions pass the value nested (attendees, recipients, line items) or as `query`.
    named = sum(
        1
        for tool in demo_tools.values()
        for variable in tool["requires"]
        if variable in tool["input_schema"]["properties"]
    )
    total = sum(len(tool["requires"]) for tool in demo_tools.values())
    assert named >= 0.85 * total


def test_permissions_are_declared_and_web_tools_need_external_api(demo_file, demo_tools):
    assert {permission["name"] for permission in demo_file["permissions"]} == PERMISSIONS
    for name, tool in demo_tools.items():
        assert tool["permissions"] and set(tool["permissions"]) <= PERMISSIONS, name
        if name.split(".")[0] in ("web", "weather", "maps"):
            assert "external_api" in tool["permissions"], name
        if name.startswith("payments."):
            assert "payments" in tool["permissions"], name


def test_schemas_are_valid_closed_and_self_contained(demo_tools):
    for name, tool in demo_tools.items():
        schema = tool["input_schema"]
        Draft202012Validator.check_schema(schema)
        assert schema["type"] == "object" and schema["additionalProperties"] is False, name
        assert schema["required"] and set(schema["required"]) <= set(schema["properties"]), name
        for prop, spec in schema["properties"].items():
            assert spec.get("type") and spec.get("description"), (name, prop)
        if "output_schema" in tool:
            Draft202012Validator.check_schema(tool["output_schema"])
            assert set(tool["produces"]) <= set(tool["output_schema"]["properties"]), name
        assert not list(refs(tool)), name
        assert len(tool["description"]) >= 30, name
    with_output = sum(1 for tool in demo_tools.values() if "output_schema" in tool)
    assert with_output >= 0.8 * len(demo_tools)


def test_cost_limits_and_lifecycle_are_well_formed(demo_tools):
    for name, tool in demo_tools.items():
        cost = tool["cost"]
        assert set(cost) == {"latency_ms_p50", "latency_ms_p95", "error_rate"}, name
        assert 0 < cost["latency_ms_p50"] <= cost["latency_ms_p95"], name
        assert 0 <= cost["error_rate"] <= 1, name
        for key, value in tool.get("resource_limits", {}).items():
            assert key in {"timeout_ms", "memory_mb", "max_output_bytes"}, name
            assert isinstance(value, int) and value > 0, name
        assert tool["status"] in ("active", "deprecated"), name
        check_config_params(tool.get("config_params", []), name)
    assert sum(1 for tool in demo_tools.values() if tool.get("resource_limits")) >= 3
    assert sum(1 for tool in demo_tools.values() if tool.get("config_params")) >= 2


def test_dependencies_name_tools_in_the_file_without_cycles(demo_tools):
    graph = {name: tool.get("dependencies", []) for name, tool in demo_tools.items()}
    assert sum(1 for deps in graph.values() if deps) >= 3
    for name, deps in graph.items():
        assert set(deps) <= set(demo_tools) and name not in deps, name

    done: set[str] = set()

    def visit(name: str, path: tuple[str, ...]) -> None:
        assert name not in path, "cycle: " + " -> ".join((*path, name))
        if name in done:
            return
        for dependency in graph[name]:
            visit(dependency, (*path, name))
        done.add(name)

    for name in graph:
        visit(name, ())


def check_invariant(invariant: dict, properties: set[str], where: str) -> None:
    assert set(invariant) == {"id", "rule", "kind", "params", "action"}, where
    assert invariant["id"] and invariant["rule"].strip(), where
    assert invariant["action"] in ACTIONS, where
    kind, params = invariant["kind"], invariant["params"]
    if kind == "mutually_exclusive":
        assert len(params["args"]) == 2 and set(params["args"]) <= properties, where
    elif kind == "requires_arg_when":
        assert {params["when"], params["arg"]} <= properties, where
        if invariant["action"] == "correct":
            assert "value" in params, where
    elif kind == "max_per_plan":
        assert isinstance(params["max"], int) and params["max"] >= 1, where
        assert params.get("when", next(iter(properties))) in properties, where
    elif kind == "unique_calls":
        assert params["fields"] and set(params["fields"]) <= properties, where
    else:
        raise AssertionError(f"{where}: unknown kind {kind!r}")


def test_invariants_are_well_formed(demo_tools):
    for name, tool in demo_tools.items():
        properties = set(tool["input_schema"]["properties"])
        ids = [invariant["id"] for invariant in tool.get("invariants", [])]
        assert len(ids) == len(set(ids)), name
        for invariant in tool.get("invariants", []):
            check_invariant(invariant, properties, name)


def test_retrieval_llm_carries_the_four_invariants(demo_tools):
    found = {
        invariant["kind"]: (invariant["params"], invariant["action"])
        for invariant in demo_tools["retrieval_llm"]["invariants"]
    }
    assert found == {
        "mutually_exclusive": ({"args": ["subquestion_id", "subquestion_ids"]}, "reject"),
        "requires_arg_when": (
            {"when": "subquestion_ids", "arg": "web_search", "value": True},
            "correct",
        ),
        "max_per_plan": ({"max": 1, "when": "subquestion_ids"}, "drop"),
        "unique_calls": ({"fields": ["query", "web_search"]}, "drop"),
    }
    assert "retrieval_llm" in demo_tools["source_link_retrieval"]["dependencies"]


def check_policy(policy: dict, demo_tools: dict, where: str) -> None:
    assert set(policy) == {"mandate", "rules", "config_params"}, where
    assert policy["mandate"].strip(), where
    check_config_params(policy["config_params"], where)
    for rule in policy["rules"]:
        assert set(rule) == {"id", "rule", "kind", "params", "action"}, where
        assert rule["action"] in ACTIONS and rule["rule"].strip(), where
        params = rule["params"]
        if rule["kind"] == "must_include":
            assert params["tools"] and set(params["tools"]) <= set(demo_tools), where
        elif rule["kind"] == "max_steps":
            assert isinstance(params["max"], int) and params["max"] >= 1, where
        elif rule["kind"] == "never_after":
            assert {params["tool"], params["after"]} <= set(demo_tools), where
            assert params["tool"] != params["after"], where
        else:
            raise AssertionError(f"{where}: unknown rule kind {rule['kind']!r}")


def test_applications_and_their_policies(demo_file, demo_tools):
    applications = {application["name"]: application for application in demo_file["applications"]}
    assert set(applications) == {"assistant", "clinical", "restricted"}
    for name, application in applications.items():
        assert application["description"].strip() and application["max_risk"] in RISKS
        assert set(application["allowed_permissions"]) <= PERMISSIONS, name
        assert set(application.get("enabled_tools", demo_tools)) <= set(demo_tools), name
        check_policy(application["policy"], demo_tools, name)

    assistant = applications["assistant"]
    assert assistant["max_risk"] == "high"
    assert set(assistant["allowed_permissions"]) == PERMISSIONS
    assert "never_after" in {rule["kind"] for rule in assistant["policy"]["rules"]}

    clinical = applications["clinical"]
    assert clinical["max_risk"] == "medium"
    assert not {"external_api", "payments"} & set(clinical["allowed_permissions"])
    enabled = set(clinical["enabled_tools"])
    assert {"retrieval_llm", "source_link_retrieval", "documents.search"} <= enabled
    must_include = [rule for rule in clinical["policy"]["rules"] if rule["kind"] == "must_include"]
    assert must_include == [
        {
            **must_include[0],
            "params": {"tools": ["retrieval_llm", "source_link_retrieval"]},
            "action": "reject",
        }
    ]
    assert "cite" in clinical["policy"]["mandate"].lower()
    assert clinical["policy"]["config_params"]
    # the clinical application can actually use what it enables
    for name in ("retrieval_llm", "source_link_retrieval"):
        assert set(demo_tools[name]["permissions"]) <= set(clinical["allowed_permissions"])
        assert demo_tools[name]["risk"] in ("low", "medium")

    restricted = applications["restricted"]
    assert restricted["max_risk"] == "low"
    assert "external_api" not in restricted["allowed_permissions"]
    visible = [
        tool
        for tool in demo_tools.values()
        if tool["risk"] == "low"
        and set(tool["permissions"]) <= set(restricted["allowed_permissions"])
    ]
    assert len(visible) >= 5  # still a useful assistant


def test_the_contracts_pass_the_registry_checks(demo_file):
    # The same checks guard `load_demo`.
    context = RegistryContext(
        variables={variable["name"] for variable in demo_file["state_variables"]},
        aliases={
            alias: variable["name"]
            for variable in demo_file["state_variables"]
            for alias in variable.get("aliases", [])
        },
        risks=RISKS,
        permissions=PERMISSIONS,
        tools={tool["name"] for tool in demo_file["tools"]},
        dependencies={tool["name"]: tool.get("dependencies", []) for tool in demo_file["tools"]},
    )
    problems = {}
    for tool in demo_file["tools"]:
        _, errors = contract_check(tool, context=context)
        if errors:
            problems[tool["name"]] = errors
    for application in demo_file["applications"]:
        errors = policy_errors(application["policy"])
        if errors:
            problems[application["name"]] = errors
    assert problems == {}
