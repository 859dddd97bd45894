"""The one ordering rule (p50 ≤ p95 ≤ max): which field it names and what it says."""

from capacity.envelope import ENVELOPE_ORDER
from capacity.ordering import ordering_errors, spaced

ENVELOPE = {
    "prompt_p50": 800, "prompt_p95": 400, "max_prompt_tokens": 8000,
    "output_p50": 100, "output_p95": 900, "max_output_tokens": 500,
}  # fmt: skip


def test_the_lower_or_the_higher_field_is_named_with_both_values():
    assert ordering_errors(ENVELOPE, ENVELOPE_ORDER) == {
        "prompt_p50": "prompt_p50 (800) must be ≤ prompt_p95 (400)",
        "output_p95": "output_p95 (900) must be ≤ max_output_tokens (500)",
    }
    assert ordering_errors(ENVELOPE, ENVELOPE_ORDER, blame="higher", label=spaced) == {
        "prompt_p95": "prompt p50 (800) must be ≤ prompt p95 (400)",
        "max_output_tokens": "output p95 (900) must be ≤ max output tokens (500)",
    }


def test_missing_values_and_ties_are_not_errors_and_the_first_error_per_field_stays():
    assert ordering_errors({"p50": 5, "p95": None, "p99": 1}, [("p50", "p95"), ("p95", "p99")]) == {}
    assert ordering_errors({"p50": 5.0, "p95": 5.0}, [("p50", "p95")]) == {}
    both = ordering_errors({"a": 3, "b": 2, "c": 1}, [("a", "b"), ("a", "c")])
    assert both == {"a": "a (3) must be ≤ b (2)"}
    assert ordering_errors({"a": 2.5, "b": 1_000_000.0}, [("b", "a")]) == {"b": "b (1000000) must be ≤ a (2.5)"}
