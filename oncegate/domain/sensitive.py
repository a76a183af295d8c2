"""Personal data in business keys: e-mail addresses, PRC resident identity numbers, payment cards.

A key is hashed before it is stored, but it still travels through flows, logs and run
histories; a key that carries personal data leaks it there. The checks aim at what is
certainly personal data (a valid check digit, a known card issuer), so that order numbers
and ticket ids pass.
"""

from __future__ import annotations

import re
from datetime import date
from enum import StrEnum

EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}")
RESIDENT_ID = re.compile(r"(?<![0-9A-Za-z])(\d{17}[\dXx])(?![0-9A-Za-z])")
# Card numbers are written together or in groups separated by single spaces or dashes.
CARD = re.compile(r"(?<![\d-])(\d(?:[ -]?\d){12,18})(?![\d])")
RESIDENT_ID_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
RESIDENT_ID_CHECK = "10X98765432"
# Issuer prefixes (IIN ranges) with the lengths those issuers use.
CARD_ISSUERS: tuple[tuple[range, int, frozenset[int]], ...] = (
    (range(4, 5), 1, frozenset({13, 16, 19})),  # Visa
    (range(51, 56), 2, frozenset({16})),  # Mastercard
    (range(2221, 2721), 4, frozenset({16})),  # Mastercard 2-series
    (range(34, 35), 2, frozenset({15})),  # American Express
    (range(37, 38), 2, frozenset({15})),
    (range(6011, 6012), 4, frozenset({16, 19})),  # Discover
    (range(644, 660), 3, frozenset({16, 19})),  # Discover 644-659
    (range(3528, 3590), 4, frozenset({16, 19})),  # JCB
    (range(62, 63), 2, frozenset({16, 17, 18, 19})),  # UnionPay
    (range(36, 37), 2, frozenset({14})),  # Diners Club
    (range(300, 306), 3, frozenset({14})),
)


class SensitiveKeyPolicy(StrEnum):
    """What to do with a key that carries personal data (``ONCEGATE_SENSITIVE_KEYS``)."""

    REJECT = "reject"
    WARN = "warn"
    OFF = "off"


def _is_resident_id(candidate: str) -> bool:
    digits = candidate.upper()
    total = sum(int(digit) * weight for digit, weight in zip(digits[:17], RESIDENT_ID_WEIGHTS, strict=True))
    if RESIDENT_ID_CHECK[total % 11] != digits[17]:
        return False
    try:
        born = date(int(digits[6:10]), int(digits[10:12]), int(digits[12:14]))
    except ValueError:
        return False
    return born.year >= 1900 and born <= date.today()


def _luhn(number: str) -> bool:
    total = 0
    for position, digit in enumerate(int(char) for char in reversed(number)):
        doubled = digit * 2 if position % 2 else digit
        total += doubled - 9 if doubled > 9 else doubled
    return total % 10 == 0


def _is_card(candidate: str) -> bool:
    number = re.sub(r"[ -]", "", candidate)
    issued = any(
        int(number[:width]) in prefixes and len(number) in lengths for prefixes, width, lengths in CARD_ISSUERS
    )
    return issued and _luhn(number)


def sensitive_findings(key: str) -> list[str]:
    """What personal data the key seems to carry, named but never quoted."""
    findings = []
    if EMAIL.search(key):
        findings.append("an e-mail address")
    if any(_is_resident_id(match) for match in RESIDENT_ID.findall(key)):
        findings.append("a resident identity number")
    if any(_is_card(match) for match in CARD.findall(key)):
        findings.append("a payment card number")
    return findings
