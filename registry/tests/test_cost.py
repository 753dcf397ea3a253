from registry.cost import cost_changed, cost_figures_changed


def test_it_calls_a_difference_within_noise_no_change():
    assert not cost_changed("latency_ms_p50", 380, 379.9)
    assert not cost_changed("latency_ms_p95", 1000, 1140)
    assert not cost_changed("error_rate", 0.02, 0.025)
    assert not cost_changed("latency_ms_p50", 0, 0.5)  # the absolute floor near zero


def test_it_calls_a_difference_beyond_noise_a_change():
    assert cost_changed("latency_ms_p50", 380, 450)
    assert cost_changed("latency_ms_p95", 1100, 1336.4)
    assert cost_changed("error_rate", 0.02, 0.099)
    assert cost_changed("latency_ms_p50", None, 380)  # a figure appearing
    assert cost_changed("unknown_figure", 1, 1.001)  # no noise defined: exact


def test_it_lists_only_figures_measured_on_both_sides():
    before = {"latency_ms_p50": 380, "error_rate": 0.02}
    after = {"latency_ms_p50": 379.9, "latency_ms_p95": 900, "error_rate": 0.2}
    assert cost_figures_changed(before, after) == ["error_rate"]
