# /// script
# requires-python = ">=3.11"
# dependencies = []
# ///
"""Build the day 13 bug-fix exercise: a tiny shop pricing project.

    uv run examples/day13/project.py [DIR]      (default: ./demo-project)

One test fails. The bug is one character in rules.tier_discount, two hops
away from the failing test (test_pricing -> pricing.checkout -> rules), and
the failure (`assert 1000 == 900`) could just as well be a shipping problem.
utils.py and its tests are correct: they are there to be read and left alone.
Expected fix, and the only acceptable diff:

    -        if amount > threshold:
    +        if amount >= threshold:

Edit FILES to make new exercises; BUGGY_LINE / FIXED_LINE describe the fix.
"""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

BUGGY_LINE = "        if amount > threshold:"
FIXED_LINE = "        if amount >= threshold:"
TEST_FILES = ("test_pricing.py", "test_utils.py")
CACHE_NAMES = {"__pycache__", ".pytest_cache", ".benchmarks", ".mypy_cache", ".ruff_cache", ".kesi"}

FILES = {
    "README.md": """\
# Shop pricing

`checkout(items, member_level)` prices a cart of `(unit_price, quantity)` pairs.

Rules (all amounts in whole dollars):

- Tier discount on the goods total: at least 2000 gets 150 off, at least 1000
  gets 100 off. Only the biggest tier applies.
- Gold members get 50 more off whenever a tier discount applies.
- Shipping is 60, free when the amount to pay (after discount) is 800 or more.

Run the tests with `python -m pytest -q`.
""",
    "rules.py": '''\
"""The shop's pricing rules, as data plus two small functions."""

# (threshold, discount), biggest first: the first tier reached wins.
DISCOUNT_TABLE = [(2000, 150), (1000, 100)]
LEVEL_BONUS = {"normal": 0, "gold": 50}
SHIPPING_FEE = 60
FREE_SHIPPING_THRESHOLD = 800


def tier_discount(amount, member_level="normal"):
    """Discount for a goods total of `amount`; 0 below the lowest tier."""
    for threshold, discount in DISCOUNT_TABLE:
        if amount > threshold:
            return discount + LEVEL_BONUS.get(member_level, 0)
    return 0


def shipping_fee(payable):
    """Shipping for what is left to pay after the discount."""
    return 0 if payable >= FREE_SHIPPING_THRESHOLD else SHIPPING_FEE
''',
    "pricing.py": '''\
"""Checkout: goods total, minus the tier discount, plus shipping."""
from rules import shipping_fee, tier_discount
from utils import round_money


def subtotal(items):
    return sum(unit_price * quantity for unit_price, quantity in items)


def checkout(items, member_level="normal"):
    goods = subtotal(items)
    payable = goods - tier_discount(goods, member_level)
    return round_money(payable + shipping_fee(payable))
''',
    "utils.py": '''\
"""Money helpers. Amounts are whole dollars, but inputs may be floats."""


def round_money(amount):
    """Round half up to a whole dollar (Python's round() rounds half to even)."""
    return int(amount + 0.5) if amount >= 0 else -int(-amount + 0.5)


def format_price(amount):
    return f"${round_money(amount):,}"
''',
    "test_pricing.py": '''\
from pricing import checkout


def test_small_order_pays_shipping():
    assert checkout([(100, 3)]) == 360


def test_discount_above_1000():
    assert checkout([(600, 2)]) == 1100


def test_discount_at_exactly_1000():
    assert checkout([(500, 2)]) == 900


def test_top_tier():
    assert checkout([(1250, 2)]) == 2350


def test_gold_member_bonus():
    assert checkout([(750, 2)], member_level="gold") == 1350
''',
    "test_utils.py": '''\
from utils import format_price, round_money


def test_round_money_rounds_half_up():
    assert [round_money(x) for x in (0.5, 1.5, 2.5, 2.4)] == [1, 2, 3, 2]


def test_format_price():
    assert format_price(1234.5) == "$1,235"
''',
}


def is_previous_build(target: Path) -> bool:
    """Only a folder holding nothing but our files (and caches) may be wiped."""
    return all(p.name in FILES or p.name in CACHE_NAMES for p in target.iterdir())


def build(target) -> Path:
    """(Re)create the project in target. Refuses to wipe a folder it did not make."""
    target = Path(target).resolve()
    if target.exists():
        if not target.is_dir() or not is_previous_build(target):
            raise SystemExit(f"project.py: {target} exists and is not an earlier build; choose a new folder.")
        shutil.rmtree(target)
    target.mkdir(parents=True)
    for name, text in FILES.items():
        (target / name).write_text(text, encoding="utf-8")
    return target


if __name__ == "__main__":
    where = build(sys.argv[1] if len(sys.argv) > 1 else "demo-project")
    print(f"Built the exercise in {where}. Try: cd {where} && python -m pytest -q")
