"""Personal data in what flows send: e-mail addresses, PRC resident ids, payment cards, IBANs, phone numbers.

A key is hashed before it is stored, but it still travels through flows, logs and run histories;
result data, target record ids, error texts and notes are stored as sent. The checks aim at what
is certainly personal data (a valid check digit, a known card issuer, a number valid in its
country's phone plan), so that order numbers, ticket ids, dates and amounts pass.

Text is read as people see it, not as it is encoded: NFKC (a fullwidth at sign or digit is the
plain one, a no-break space is a space), invisible format characters dropped, and percent-encoding
undone as a second reading (``ana%40contoso.com``). Digits may be grouped by spaces, tabs, dots,
slashes, dashes or underscores, and stand next to letters. A number counts only when it starts and
ends on the edges of such groups, grouped the way such numbers are written, and never inside a GUID
or a hash: a long reference is not searched digit by digit for something that happens to pass a check.

Three rules keep honest business ids apart from personal data (issue 22); each is measured on the
corpus of ``tests/service/business_ids.py``. Where the shape still cannot tell, a scope's owner
declares what its keys look like (:mod:`oncegate.domain.key_patterns`).

- A payment card is a card when it is written as one (in groups: ``4111 1111 1111 1111``,
  ``4111-1111-…``, ``4111/1111/…``) or labelled as one (``card``, ``PAN``, ``Visa``, ``卡号``… in the
  text or in the name of the member that holds it). An unbroken run of digits is an id: one
  19-digit platform order id in seventy and one random 16-digit id in forty pass Luhn with a
  card issuer's prefix, so the digits alone cannot tell.
- A resident id names a person born at least two years ago: an 18-digit order number of the form
  ``<area><yyyymmdd><seq>`` carries a recent order date and passes the check digit one time in
  eleven, exactly like the id of a newborn. The ids of infants are missed, on purpose.
- A mainland China mobile number is found without its ``+86`` as well (``13800138000``,
  ``86-138-0013-8000``, ``0086 …``, ``(+86) …``): eleven digits starting 13-19 that are a mobile
  number in China's numbering plan. Other countries' national numbers are left alone: without a
  country code they look like any other number.
- 00 glued to a country code (``008613800138000``) is a number when it is the whole run of digits, ten or
  more after the 00, and a mobile's: zero-padded ids look alike, and SAP's ten-digit documents never reach ten.
"""

from __future__ import annotations

import functools
import itertools
import re
import unicodedata
from collections.abc import Callable, Iterator
from datetime import date
from enum import StrEnum
from typing import TYPE_CHECKING
from urllib.parse import unquote

# phonenumbers (its metadata of every country's plan, about a twentieth of the app's import) is imported where a
# candidate the patterns found is checked against a numbering plan: a process whose keys and stored values hold no
# "+" number, "00" prefix or Chinese mobile never loads it (issue 36).
if TYPE_CHECKING:
    import phonenumbers


class SensitivePolicy(StrEnum):
    """What to do with personal data in a key (``ONCEGATE_SENSITIVE_KEYS``) or in stored data (``…_DATA``)."""

    REJECT = "reject"
    WARN = "warn"
    OFF = "off"


def _compiled(pattern: str) -> Callable[[], re.Pattern[str]]:
    """``pattern``, compiled when first asked for. Most keys and values hold no "@" and too few digits for any
    number searched for here, so a new process compiled these for nothing at import (issue 36's cold start)."""
    return functools.cache(lambda: re.compile(pattern))


# -- reading the text ------------------------------------------------------------------------------------

# Between two groups of a number: up to three spaces, tabs, dots, slashes, dashes or underscores ("4111 - 1111").
_SEPARATOR = r"[\s./_\-]{1,3}"
SEPARATOR = _compiled(_SEPARATOR)
DIGIT_RUN = _compiled(rf"[0-9]+(?:{_SEPARATOR}[0-9]+)*")
# A resident id may end in the check character X.
RESIDENT_RUN = _compiled(rf"[0-9]+(?:{_SEPARATOR}[0-9]+)*[Xx]?")


def _canonical(text: str) -> str:
    """NFKC, without invisible format characters (zero-width spaces, soft hyphens), with ASCII digits."""
    text = unicodedata.normalize("NFKC", text)
    if text.isascii():
        return text
    kept = (char for char in text if unicodedata.category(char) != "Cf")
    # Other scripts' decimal digits (Arabic-Indic, Devanagari...) write the same number.
    return "".join(str(unicodedata.decimal(char)) if char.isdecimal() else char for char in kept)


def _readings(text: str) -> list[str]:
    """The text as it reads, and as it reads once percent-encoding is undone (when that changes it)."""
    plain = _canonical(text)
    if "%" not in plain:
        return [plain]
    decoded = _canonical(unquote(plain))
    return [plain] if decoded == plain else [plain, decoded]


# GUIDs (with dashes, or 32 hex digits) and other long hexadecimal ids and hashes: their digits come in long
# runs by chance, and such a run is no card or id number.
HEX_ID = _compiled(
    r"(?<![0-9A-Za-z])(?:\{?[0-9A-Fa-f]{8}(?:-[0-9A-Fa-f]{4}){3}-[0-9A-Fa-f]{12}\}?|[0-9A-Fa-f]{24,})(?![0-9A-Za-z])"
)


def _without_hex_ids(text: str) -> str:
    # A mark, not a space: spaces around the id must not join the numbers on either side into one.
    return HEX_ID().sub("#", text) if len(text) >= 24 else text


def _grouped(run: str, inner: range, longest: int, *, alone: bool = True) -> Iterator[str]:
    """Each group of ``run`` (unless not ``alone``), and each stretch of groups written the way such a number is.

    In a stretch, every group but the last is ``inner`` long and the last no longer; ``longest``
    bounds the whole, separators left out. Not any grouping: "12 345 67 8901 23 45" in a table of
    counts is no card, nor are the groups of an order id like "113-4829547-2231462" a card's.
    """
    groups = SEPARATOR().split(run)
    for start, first in enumerate(groups):
        if alone:
            yield first
        joined = first
        # By index, not over a slice of the rest: copying the rest from each group was quadratic in the groups.
        for index in range(start + 1, len(groups)):
            previous, group = groups[index - 1], groups[index]
            if len(previous) not in inner or len(group) > inner[-1] or len(joined) + len(group) > longest:
                break
            joined += group
            yield joined


# -- e-mail addresses ----------------------------------------------------------------------------------------

# Letters of any script (``\w``), so that internationalised addresses (ana@bücher.de) are found too; a quoted
# local part ("ana"@contoso.com) and a domain literal (ana@[10.0.0.1]) are addresses as RFC 5321 writes them.
# The bounded repeats keep a long string without an address linear to search.
EMAIL = _compiled(
    r"(?:[\w.!#$%&'*+/=?^`{|}~-]{1,64}|\"[^\"\\\r\n]{1,62}\")@"
    r"(?:(?:[^\W_](?:[\w-]{0,61}[^\W_])?\.){1,8}(?:[^\W\d_]{2,63}|[Xx][Nn]--[A-Za-z0-9-]{1,59})"
    r"|\[(?:[0-9]{1,3}\.){3}[0-9]{1,3}\]|\[IPv6:[0-9A-Fa-f:.]{2,45}\])"
)


def _has_email(text: str) -> bool:
    return "@" in text and EMAIL().search(text) is not None


# -- PRC resident identity numbers ---------------------------------------------------------------------------

RESIDENT_ID = _compiled(r"[0-9]{17}[0-9X]")
RESIDENT_ID_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
RESIDENT_ID_CHECK = "10X98765432"
# Written in groups: region, birth date, sequence and check (6-8-4), or in fours (4-4-4-4-2).
RESIDENT_GROUP = range(4, 9)
# The first two digits name a province (GB/T 2260), or Hong Kong, Macao, Taiwan and foreigners' permits.
PROVINCES = frozenset(
    {11, 12, 13, 14, 15, 21, 22, 23, 31, 32, 33, 34, 35, 36, 37, 41, 42, 43, 44, 45, 46, 50, 51, 52, 53, 54}
    | {61, 62, 63, 64, 65, 71, 81, 82, 83, 91}
)


# The youngest a resident id's holder is taken to be. Order numbers of the form <area><yyyymmdd><seq> carry
# recent dates (and a future one for a delivery); an id of someone born in the last two years is missed.
YOUNGEST_DAYS = 2 * 366


def _is_resident_id(candidate: str) -> bool:
    digits = candidate.upper()
    if len(digits) != 18 or not RESIDENT_ID().fullmatch(digits) or int(digits[:2]) not in PROVINCES:
        return False
    total = sum(int(digit) * weight for digit, weight in zip(digits[:17], RESIDENT_ID_WEIGHTS, strict=True))
    if RESIDENT_ID_CHECK[total % 11] != digits[17]:
        return False
    try:
        born = date(int(digits[6:10]), int(digits[10:12]), int(digits[12:14]))
    except ValueError:
        return False
    return born.year >= 1900 and (date.today() - born).days >= YOUNGEST_DAYS


def _has_resident_id(text: str) -> bool:
    runs = RESIDENT_RUN().findall(_without_hex_ids(text))
    return any(_is_resident_id(number) for run in runs for number in _grouped(run, RESIDENT_GROUP, 18))


# -- payment cards -------------------------------------------------------------------------------------------

# Issuer prefixes (IIN ranges) with the lengths those issuers use. Not Visa's 13 digits, no longer
# issued: every GTIN-13 of a German product (400-440) that happened to pass Luhn would be a "card".
CARD_ISSUERS: tuple[tuple[range, frozenset[int]], ...] = (
    (range(4, 5), frozenset({16, 19})),  # Visa
    (range(51, 56), frozenset({16})),  # Mastercard
    (range(2221, 2721), frozenset({16})),  # Mastercard 2-series
    (range(34, 35), frozenset({15})),  # American Express
    (range(37, 38), frozenset({15})),
    (range(6011, 6012), frozenset({16, 19})),  # Discover
    (range(644, 660), frozenset({16, 19})),  # Discover 644-659
    (range(3528, 3590), frozenset({16, 19})),  # JCB
    (range(62, 63), frozenset({16, 17, 18, 19})),  # UnionPay
    (range(36, 37), frozenset({14})),  # Diners Club
    (range(300, 306), frozenset({14})),
)
# A card written in groups: of 4 to 6 digits (4-4-4-4, 4-6-5), but the last, which may be shorter (4-4-4-4-3).
CARD_GROUP = range(4, 7)


@functools.cache
def card_prefixes() -> dict[str, frozenset[int]]:
    """CARD_ISSUERS by prefix as written ("4", "51", "2221"...): one lookup per prefix width, not a scan of the table.
    Made for the first number long enough to be a card's, which most flows never send: some 600 prefixes that a new
    process would otherwise write out before its first answer (issue 36)."""
    return {str(prefix): lengths for prefixes, lengths in CARD_ISSUERS for prefix in prefixes}


def _luhn(number: str) -> bool:
    total = 0
    for position, digit in enumerate(int(char) for char in reversed(number)):
        doubled = digit * 2 if position % 2 else digit
        total += doubled - 9 if doubled > 9 else doubled
    return total % 10 == 0


def _gtin(number: str) -> bool:
    """Whether the number passes the GS1 check digit (GTIN-8 to -14: product and shipping-case codes)."""
    total = sum(int(digit) * (3 if position % 2 else 1) for position, digit in enumerate(reversed(number)))
    return total % 10 == 0


def _is_card(number: str) -> bool:
    if not 14 <= len(number) <= 19:  # no issuer's length: most groups of a long run are short
        return False
    prefixes = card_prefixes()
    issued = any(len(number) in prefixes.get(number[:width], ()) for width in range(1, 5))
    # A GTIN-14 of a case of Chinese goods (indicator 3, prefix 69x) looks like a 14-digit Diners Club number;
    # passing the GS1 check it is taken for the product code (one Diners number in ten is missed for it).
    return issued and number.isdigit() and _luhn(number) and not (len(number) == 14 and _gtin(number))


# Words that say a number is a card's, in the text or in the name of the member that holds it ("cardNumber").
CARD_WORD = _compiled(
    r"(?i)\b(?:cards?|credit|debit|pan|cc|ccn|visa|master\s?card|amex|unionpay|kreditkarte|tarjeta|carte)\b"
    r"|卡号|信用卡|银行卡|借记卡"
)
# Between the words of a member name: "cardNumber", "card_no" and "CC-Num" each start with a card word.
WORD_EDGE = _compiled(r"(?<=[a-z])(?=[A-Z])|[_\d]+")


def card_labelled(text: str) -> bool:
    """Whether ``text`` (a text, or the names of the members that hold one) says its numbers are cards'."""
    return CARD_WORD().search(WORD_EDGE().sub(" ", text)) is not None


def _has_card(text: str, *, labelled: bool) -> bool:
    """A card number written in a card's groups, or, when the text is ``labelled`` a card's, written any way."""
    runs = DIGIT_RUN().findall(_without_hex_ids(text))
    for run in runs:
        numbers = _grouped(run, CARD_GROUP, 19, alone=labelled)
        # Labelled, a card split anyhow ("41111111 11111111", two fields read together) is a card still.
        whole = [SEPARATOR().sub("", run)] if labelled else []
        if any(_is_card(number) for number in itertools.chain(numbers, whole)):
            return True
    return False


# -- IBANs ---------------------------------------------------------------------------------------------------

# Each country's IBAN length, from the SWIFT IBAN registry.
IBAN_LENGTHS = {
    **dict.fromkeys(("NO",), 15),
    **dict.fromkeys(("BE",), 16),
    **dict.fromkeys(("DK", "FI", "FK", "FO", "GL", "NL", "SD"), 18),
    **dict.fromkeys(("MK", "SI"), 19),
    **dict.fromkeys(("AT", "BA", "EE", "KZ", "LT", "LU", "MN", "XK"), 20),
    **dict.fromkeys(("CH", "HR", "LI", "LV"), 21),
    **dict.fromkeys(("BG", "BH", "CR", "DE", "GB", "GE", "IE", "ME", "RS", "VA"), 22),
    **dict.fromkeys(("AE", "GI", "IL", "IQ", "OM", "SO", "TL"), 23),
    **dict.fromkeys(("AD", "CZ", "ES", "MD", "PK", "RO", "SA", "SE", "SK", "TN", "VG"), 24),
    **dict.fromkeys(("LY", "PT", "ST"), 25),
    **dict.fromkeys(("IS", "TR"), 26),
    **dict.fromkeys(("BI", "DJ", "FR", "GR", "IT", "MC", "MR", "SM"), 27),
    **dict.fromkeys(("AL", "AZ", "BY", "CY", "DO", "GT", "HN", "HU", "LB", "NI", "PL", "SV"), 28),
    **dict.fromkeys(("BR", "EG", "PS", "QA", "UA"), 29),
    **dict.fromkeys(("JO", "KW", "MU", "YE"), 30),
    **dict.fromkeys(("MT", "SC"), 31),
    **dict.fromkeys(("LC",), 32),
    **dict.fromkeys(("RU",), 33),
}
# A country code and two check digits, not glued to a word before them.
IBAN_START = _compiled(r"(?<![A-Za-z0-9])[A-Za-z]{2}[0-9]{2}")


@functools.cache
def _iban_of_length(length: int) -> re.Pattern[str]:
    """``length`` letters and digits, single separators allowed between them, ending at the end of a word."""
    return re.compile(rf"[A-Za-z0-9](?:[\s._\-]?[A-Za-z0-9]){{{length - 1}}}(?![A-Za-z0-9])")


def _is_iban(compact: str) -> bool:
    code = compact.upper()
    if not 2 <= int(code[2:4]) <= 98:  # ISO 13616 never issues check digits 00, 01 or 99
        return False
    # ISO 7064 mod 97-10: the country and check digits moved to the end, letters as 10-35.
    digits = "".join(str(int(char, 36)) for char in code[4:] + code[:4])
    return int(digits) % 97 == 1


def _has_iban(text: str) -> bool:
    # Not without hex ids: an Andorran IBAN (AD and 22 digits) is one, and IBANs' own check is strict enough.
    for start in IBAN_START().finditer(text):
        length = IBAN_LENGTHS.get(start.group()[:2].upper())
        written = _iban_of_length(length).match(text, start.start()) if length else None
        if written and _is_iban(re.sub(r"[\s._\-]", "", written.group())):
            return True
    return False


# -- phone numbers in the international (E.164) form -----------------------------------------------------------

# "(+86)" and "0086 " are written for "+86": a country code in parentheses, or after the international prefix 00
# and followed by a separator (with none, "0049151…" is as likely a zero-padded id).
INTERNATIONAL_PREFIX = _compiled(r"(?<![0-9A-Za-z+])(?:\(\s?\+([1-9][0-9]{0,2})\s?\)|00([1-9][0-9]{0,2})(?=[ \t.\-/]))")
# A "+", a country code, then digits in groups: a single space, tab, dot or dash between them, or a
# group in parentheses ("+44 (0)20 7946 0958", "+1 (212) 555-0123"). Not after a digit or a "+" ("1+49").
PHONE = _compiled(r"(?<![0-9+])\+[1-9][0-9]*(?:(?:[ \t.\-]|[ \t.\-]?\([0-9]{1,4}\)[ \t.\-]?)[0-9]+)*")
PHONE_DIGITS = range(8, 16)  # E.164 allows 15 at most; below 8 too many short codes and counts look alike
# "+1234567.89" is a signed amount: a single dot before the last one or two digits.
SIGNED_AMOUNT = _compiled(r"\+[0-9]+\.[0-9]{1,2}")


def _is_phone(candidate: str) -> bool:
    import phonenumbers

    if sum(char.isdigit() for char in candidate) not in PHONE_DIGITS or SIGNED_AMOUNT().fullmatch(candidate):
        return False
    try:
        number = phonenumbers.parse(candidate.replace("\t", " "), None)  # it reads no tabs
    except phonenumbers.NumberParseException:
        return False
    # Valid in its country's numbering plan: the country code exists, the length and the prefix fit.
    return bool(phonenumbers.is_valid_number(number))


def _has_phone(text: str) -> bool:
    if "00" in text and _has_glued_mobile(text):
        return True
    if "(" in text or "00" in text:
        text = INTERNATIONAL_PREFIX().sub(lambda prefix: "+" + (prefix[1] or prefix[2]), text)
    for match in PHONE().finditer(text):
        candidate = match.group()
        # The number may run into digits after it ("+49 30 1234567 - 2026"): try it ending at each group.
        if any(_is_phone(candidate[:end]) for end in reversed(_phone_ends(candidate))):
            return True
    return False


def _phone_ends(candidate: str) -> list[int]:
    """Where a number in ``candidate`` may end: after each group, up to E.164's 15 digits (a long run stays linear)."""
    ends, digits, previous = [], 0, 0
    for group in re.finditer(r"[0-9]+(?![0-9)])", candidate):
        digits += sum(char.isdigit() for char in candidate[previous : group.end()])
        if digits > PHONE_DIGITS[-1]:
            break
        ends.append(previous := group.end())
    return ends


# The international prefix 00 glued to a country code and number, 10 to 15 digits, the whole run (issue 31).
GLUED_INTERNATIONAL = _compiled(r"(?<![0-9A-Za-z+])00([1-9][0-9]{9,14})(?![0-9])")


def _has_glued_mobile(text: str) -> bool:
    return any(_is_glued_mobile(match[1]) for match in GLUED_INTERNATIONAL().finditer(text))


def _is_glued_mobile(digits: str) -> bool:
    import phonenumbers

    try:
        number = phonenumbers.parse("+" + digits, None)
    except phonenumbers.NumberParseException:
        return False
    return _is_mobile(number)


def _is_mobile(number: phonenumbers.PhoneNumber) -> bool:
    """Whether the number is a mobile's (or may be, where the plan does not tell) and valid in its country's plan."""
    import phonenumbers

    kind = phonenumbers.number_type(number)
    mobile = kind in (phonenumbers.PhoneNumberType.MOBILE, phonenumbers.PhoneNumberType.FIXED_LINE_OR_MOBILE)
    return mobile and phonenumbers.is_valid_number(number)


# Eleven digits starting 13-19, whole or as 3-4-4 (or 3-8, 7-4), after an "86" or not, never inside a longer run.
CHINA_MOBILE = _compiled(r"(?<![0-9])(?:86[\s./_\-]{0,3})?(1[3-9][0-9](?:[\s./_\-]?[0-9]{4}){2})(?![0-9])")


def _is_china_mobile(candidate: str) -> bool:
    import phonenumbers

    return _is_mobile(phonenumbers.parse(re.sub(r"[^0-9]", "", candidate), "CN"))


def _has_china_mobile(text: str) -> bool:
    return any(_is_china_mobile(match[1]) for match in CHINA_MOBILE().finditer(text))


# -- all of them ---------------------------------------------------------------------------------------------

CARD = "a payment card number"

DETECTORS: tuple[tuple[str, Callable[[str, bool], bool]], ...] = (
    ("an e-mail address", lambda text, _: _has_email(text)),
    ("a resident identity number", lambda text, _: _has_resident_id(text)),
    (CARD, lambda text, labelled: _has_card(text, labelled=labelled)),
    ("an IBAN", lambda text, _: _has_iban(text)),
    ("a phone number", lambda text, _: _has_phone(text) or _has_china_mobile(text)),
)

# The findings that are numbers an honest id may share the shape of: a scope's owner can declare such keys.
NUMBER_FINDINGS = frozenset({"a resident identity number", CARD, "a phone number"})

# The fewest ASCII digits a reading holds when a detector finds something in it: a resident id's 17 and its check
# character, a card's shortest issued length (Diners Club's 14), an IBAN's two check digits after its country,
# a phone number's 8 (PHONE_DIGITS; a Chinese mobile's 11, a number glued to 00 its 10). Text whose readings hold
# fewer is not searched for it: most keys and values hold no long run of digits (issue 36).
FEWEST_DIGITS = {
    "an e-mail address": 0,
    "a resident identity number": 17,
    CARD: 14,
    "an IBAN": 2,
    "a phone number": PHONE_DIGITS[0],
}
_DIGITS = "0123456789"


def sensitive_findings(text: str, *, context: str = "") -> list[str]:
    """What personal data the text seems to carry, named but never quoted.

    ``context`` names where the text is held (``data.payment.cardNumber``): a name can say that a
    run of digits is a card's, as a word in the text can.
    """
    every = _readings(text)
    digits = max(sum(map(reading.count, _DIGITS)) for reading in every)
    # Read only where a card may be found: whether the text or its name says a run of digits is a card's.
    labelled = digits >= FEWEST_DIGITS[CARD] and (any(map(card_labelled, every)) or card_labelled(context))
    return [
        finding
        for finding, found in DETECTORS
        if digits >= FEWEST_DIGITS[finding] and any(found(reading, labelled) for reading in every)
    ]
