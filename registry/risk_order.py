"""The risk levels a registry starts with, lowest first, and their ranks.

Pure Python (no Django). A deployment's levels are ``registry.models.RiskLevel`` rows, read
through ``registry.selectors.risk_ranks``; these defaults serve where no database is asked
(pure modules, suggestions, benchmarks) and match the levels the first migration creates.
"""

RISK_ORDER = ("low", "medium", "high")
# Higher means riskier; only the order counts.
DEFAULT_RISK_RANK: dict[str, int] = {risk: rank for rank, risk in enumerate(RISK_ORDER, start=1)}
