"""capacity.quotes: whole commitments covering the window, the cheapest marked, month ends clamped."""

from datetime import UTC, datetime

from capacity.quotes import TermRate, add_months, quote_rows

START = datetime(2027, 1, 31, tzinfo=UTC)
RATES = [TermRate("on_demand", 0, 10.0), TermRate("1_month", 1, 9.0), TermRate("1_year", 12, 6.0)]


def test_add_months_clamps_to_the_month_end():
    assert add_months(START, 1) == datetime(2027, 2, 28, tzinfo=UTC)
    assert add_months(START, 13) == datetime(2028, 2, 29, tzinfo=UTC)


def test_whole_terms_cover_the_window_and_the_cheapest_is_marked():
    end = add_months(START, 3)  # 89 days
    rows = {
        r["term"]: r for r in quote_rows(cu=2, rates=RATES, start=START, end=end, useful_output_tokens_per_hour=1e6)
    }
    hours = (end - START).total_seconds() / 3600
    assert rows["on_demand"]["usd_total"] == round(2 * 10 * hours, 2) and rows["on_demand"]["commitment_end"] is None
    assert rows["1_month"]["hours_paid"] == 3 * 730  # 89 days: three whole months
    assert rows["1_year"]["usd_total"] == round(2 * 6 * 12 * 730, 2)
    assert rows["1_year"]["commitment_end"] == add_months(START, 12).isoformat()
    assert rows["1_month"]["usd_per_month"] == 2 * 9 * 730
    assert rows["1_month"]["usd_per_million_useful_output_tokens"] == 18.0
    assert [t for t, r in rows.items() if r["cheapest"]] == ["1_month"]
    long = quote_rows(cu=2, rates=RATES, start=START, end=add_months(START, 12), useful_output_tokens_per_hour=None)
    assert [r["term"] for r in long if r["cheapest"]] == ["1_year"]
    assert long[0]["usd_per_million_useful_output_tokens"] is None
