"""The one pool rule (issue 34.2): the home pool if it has room, else the most headroom after the
grant, ties to the lowest pk; a scope's home binds it (docs/contract.md §5), so a full home is chosen and
marked as not fitting."""

from __future__ import annotations

from decimal import Decimal as D
from types import SimpleNamespace

from entitlements.pool_choice import choose_pool

A, B, C = (SimpleNamespace(pk=pk, slug=slug) for pk, slug in ((1, "a"), (2, "b"), (3, "c")))


def _pick(rows, cu, home=None, counts=True):
    c = choose_pool(rows, cu=D(cu), home_pk=home, counts_as_sold=counts)
    return (c.pool.slug, c.fits, c.after_cu) if c else None


def test_no_home_takes_the_most_headroom_after_the_grant():
    assert _pick([(A, D(50)), (B, D(80)), (C, D(79))], "10") == ("b", True, D(70))


def test_ties_go_to_the_lowest_pk():
    assert _pick([(B, D(80)), (A, D(80))], "10") == ("a", True, D(70))


def test_the_home_pool_wins_when_it_has_room_even_with_less_headroom():
    assert _pick([(A, D(20)), (B, D(80))], "10", home=1) == ("a", True, D(10))
    assert _pick([(A, D(10)), (B, D(80))], "10", home=1) == ("a", True, D(0))  # exactly full still fits


def test_a_full_home_is_still_the_choice_and_does_not_fit():
    assert _pick([(A, D(5)), (B, D(80))], "10", home=1) == ("a", False, D(-5))


def test_no_pool_with_room_picks_the_closest_and_says_it_does_not_fit():
    assert _pick([(A, D(5)), (B, D(8))], "10") == ("b", False, D(-2))


def test_a_class_that_takes_no_headroom_always_fits():
    assert _pick([(A, D(0)), (B, D(-3))], "10", counts=False) == ("a", True, D(0))


def test_no_pool():
    assert _pick([], "10") is None
