"""The personal-data check's digit count against the full check: it skips a detector only where it finds nothing.

:func:`~oncegate.domain.sensitive.sensitive_findings` counts a text's digits first and runs a detector only on text
that holds at least the fewest digits it can find something in (``FEWEST_DIGITS``, issue 36). The oracle here is
the check as it was before: every detector on every reading, the card label read always. The texts are the
corpora's hits and business ids, cut, stripped of digits and joined to other text, so that many sit just below or
above a detector's fewest digits, and any text of digits, separators and the characters the patterns read.
"""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import example, given, settings
from hypothesis import strategies as st

from oncegate.domain.sensitive import DETECTORS, FEWEST_DIGITS, _readings, card_labelled, sensitive_findings

CORPUS = Path(__file__).parents[1] / "service" / "corpus"
PERSONAL: dict[str, list[str]] = json.loads((CORPUS / "personal.json").read_text(encoding="utf-8"))
BUSINESS: dict[str, list[str]] = json.loads((CORPUS / "business.json").read_text(encoding="utf-8"))
HITS = [hit for hits in PERSONAL.values() for hit in hits]
SAMPLES = HITS + [text for texts in BUSINESS.values() for text in texts]

# What the patterns read: digits (ASCII, fullwidth, Arabic-Indic, percent-encoded), separators, signs, letters.
PIECES = st.sampled_from(
    [
        *"0123456789",
        *" .-/_\t\u00a0+()@%XxaZ",
        "00",
        "86",
        "+86 ",
        "(+44)",
        "%40",
        "%31",
        "\uff11",
        "\u0661",
        "\u200b",
        "card ",
        "PAN:",
        "DE89",
        "GB82",
    ]
)
NOISE = st.lists(PIECES, max_size=30).map("".join)


@st.composite
def near_a_hit(draw: st.DrawFn) -> str:
    """A corpus text cut, stripped of some digits, or joined to other text."""
    text = draw(st.sampled_from(SAMPLES))
    start = draw(st.integers(0, len(text)))
    end = draw(st.integers(start, len(text)))
    cut = draw(st.sampled_from([text, text[start:end], text[:start] + text[end:]]))
    dropped = draw(st.integers(0, 3))
    for _ in range(dropped):
        digits = [index for index, char in enumerate(cut) if char.isdigit()]
        if digits:
            index = draw(st.sampled_from(digits))
            cut = cut[:index] + cut[index + 1 :]
    return draw(NOISE) + cut + draw(NOISE)


def unfiltered(text: str, context: str) -> list[str]:
    """The check before the digit count: every detector on every reading."""
    readings = _readings(text)
    labelled = any(map(card_labelled, readings)) or card_labelled(context)
    return [finding for finding, found in DETECTORS if any(found(reading, labelled) for reading in readings)]


def test_every_detector_has_its_fewest_digits() -> None:
    assert {finding for finding, _ in DETECTORS} == set(FEWEST_DIGITS)


def test_the_corpus_hits_are_found_as_before() -> None:
    assert [sensitive_findings(hit) for hit in HITS] == [unfiltered(hit, "") for hit in HITS]


@settings(max_examples=3000)
@given(text=near_a_hit() | NOISE, context=st.sampled_from(["", "cardNumber", "data.payment.pan", "orderId"]))
@example(text="4111 1111 1111 1111", context="")
@example(text="41111111111111", context="cardNumber")
@example(text="11010519491231002X", context="")
@example(text="+86 138 0013 8000", context="")
@example(text="+500 41234", context="")  # the Falklands: a phone number of 8 digits, the fewest
@example(text="00861380013800", context="")
@example(text="DE89 3704 0044 0532 0130 00", context="")
@example(text="ana%40contoso.com", context="")
@example(text="\uff14\uff11\uff11\uff11 1111 1111 1111", context="")
def test_the_digit_count_never_skips_what_the_full_check_finds(text: str, context: str) -> None:
    assert sensitive_findings(text, context=context) == unfiltered(text, context)
