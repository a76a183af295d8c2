"""A corpus of realistic business identifiers, made by generators with a fixed seed (issue 22).

Each kind is made the way the systems that issue it make it: ERP document numbers, e-commerce
order ids (platforms' 19-digit ids among them), tickets, invoices (Chinese fapiao numbers too),
contracts, GTINs with their check digit, parcel tracking numbers, VINs with their check digit,
and order numbers that carry a date, ``<area><yyyymmdd><seq>`` as Chinese shops write them.
Every one of them is a key a flow may send and a value it may store; none is personal data.

Run as a module to print how many of each kind the detectors refuse, with the detectors of this
tree or of another file (``python -m tests.service.business_ids path/to/sensitive.py``).
"""

from __future__ import annotations

import importlib.util
import random
import string
import sys
from collections.abc import Callable
from datetime import date, timedelta

SEED = 22
PER_KIND = 250
DIGITS = string.digits
UPPER = string.ascii_uppercase
# Area codes (GB/T 2260) of Shanghai Pudong, Beijing Chaoyang, Shenzhen Nanshan, Hangzhou Xihu, Chengdu Wuhou.
AREAS = ("310115", "110105", "440305", "330106", "510107", "320102", "420106", "500103")


def _digits(rng: random.Random, count: int) -> str:
    return "".join(rng.choices(DIGITS, k=count))


def _gs1_check(body: str) -> str:
    total = sum(int(digit) * (3 if position % 2 == 0 else 1) for position, digit in enumerate(reversed(body)))
    return str(-total % 10)


def _recent(rng: random.Random) -> date:
    """An order's date: within the last eighteen months, or up to two months ahead (a delivery date)."""
    return date.today() + timedelta(days=rng.randint(-540, 60))


def erp(rng: random.Random) -> str:
    return rng.choice(
        (
            lambda: "45" + _digits(rng, 8),  # SAP purchase order
            lambda: "00" + _digits(rng, 8),  # SAP sales document
            lambda: "51" + _digits(rng, 8),  # SAP material document
            lambda: f"SO-{_digits(rng, 6)}",  # Dynamics 365 sales order
            lambda: f"PO{rng.randint(2019, 2026)}{_digits(rng, 6)}",
            lambda: f"{rng.choice(['DE01', 'CN10', 'US20'])}-{_digits(rng, 10)}",  # company code and document
            lambda: _digits(rng, rng.choice((10, 12))),  # ERP document numbers without a prefix
        )
    )()


def ecommerce(rng: random.Random) -> str:
    return rng.choice(
        (
            lambda: f"{_digits(rng, 3)}-{_digits(rng, 7)}-{_digits(rng, 7)}",  # Amazon
            lambda: f"#{rng.randint(1001, 99999)}",  # Shopify
            lambda: str(rng.randint(1, 9)) + _digits(rng, 11),  # JD.com, 12 digits
            lambda: f"{(date.today() - timedelta(days=rng.randint(0, 400))):%y%m%d}-{_digits(rng, 15)}",  # PDD
            lambda: f"{rng.choice(['WC', 'MG', 'BC'])}-{rng.randint(100000, 999999)}",  # WooCommerce, Magento
            lambda: str(rng.randint(1, 9)) + _digits(rng, 15),  # marketplace ids of 16 digits
        )
    )()


def platform_order(rng: random.Random) -> str:
    """Taobao and Tmall order ids: 19 digits."""
    return str(rng.randint(1, 9)) + _digits(rng, 18)


def sixteen_digit_id(rng: random.Random) -> str:
    return str(rng.randint(1, 9)) + _digits(rng, 15)


def fifteen_digit_id(rng: random.Random) -> str:
    return str(rng.randint(1, 9)) + _digits(rng, 14)


def ticket(rng: random.Random) -> str:
    return rng.choice(
        (
            lambda: f"{''.join(rng.choices(UPPER, k=rng.randint(2, 5)))}-{rng.randint(1, 99999)}",  # Jira
            lambda: f"INC{_digits(rng, 7)}",  # ServiceNow
            lambda: f"REQ{_digits(rng, 7)}",
            lambda: str(rng.randint(1000, 9999999)),  # Zendesk
            lambda: f"CS{date.today():%Y}{_digits(rng, 8)}",
        )
    )()


def invoice(rng: random.Random) -> str:
    return rng.choice(
        (
            lambda: f"INV-{rng.randint(2019, 2026)}-{_digits(rng, 6)}",
            lambda: f"RE{_digits(rng, 8)}",
            lambda: f"{_digits(rng, 12)}-{_digits(rng, 8)}",  # fapiao code and number
            lambda: f"{rng.randint(23, 26)}{rng.choice(AREAS)[:2]}{_digits(rng, 16)}",  # fully digital fapiao, 20
            lambda: f"F{rng.randint(2019, 2026)}/{_digits(rng, 5)}",
        )
    )()


def contract(rng: random.Random) -> str:
    return rng.choice(
        (
            lambda: f"CT-{rng.randint(2015, 2026)}-{_digits(rng, 4)}",
            lambda: f"HT{_recent(rng):%Y%m%d}{_digits(rng, 3)}",  # 合同 numbers with their date
            lambda: f"{''.join(rng.choices(UPPER, k=3))}/{rng.randint(2015, 2026)}/{_digits(rng, 5)}",
            lambda: f"AGR{_digits(rng, 9)}",
        )
    )()


def gtin(rng: random.Random) -> str:
    body = _digits(rng, rng.choice((7, 11, 12, 13)))
    return body + _gs1_check(body)


def tracking(rng: random.Random) -> str:
    return rng.choice(
        (
            lambda: "1Z" + "".join(rng.choices(UPPER + DIGITS, k=6)) + _digits(rng, 10),  # UPS
            lambda: _digits(rng, 12),  # FedEx Express
            lambda: "9" + _digits(rng, 21),  # USPS
            lambda: _digits(rng, 10),  # DHL Express
            lambda: "SF" + _digits(rng, 13),  # SF Express
            lambda: f"{rng.choice(['EA', 'EE', 'LX', 'RR'])}{_digits(rng, 9)}CN",  # UPU: China Post, EMS
            lambda: "7" + _digits(rng, 13),  # ZTO, 14 digits
            lambda: "JD" + _digits(rng, 13),
        )
    )()


VIN_LETTERS = "ABCDEFGHJKLMNPRSTUVWXYZ"  # no I, O or Q
VIN_VALUES = dict(zip("ABCDEFGH", range(1, 9), strict=True)) | dict(zip("JKLMN", range(1, 6), strict=True))
VIN_VALUES |= {"P": 7, "R": 9} | dict(zip("STUVWXYZ", range(2, 10), strict=True))
VIN_WEIGHTS = (8, 7, 6, 5, 4, 3, 2, 10, 0, 9, 8, 7, 6, 5, 4, 3, 2)


def vin(rng: random.Random) -> str:
    chars = rng.choices(VIN_LETTERS + DIGITS * 2, k=17)
    total = sum((int(c) if c.isdigit() else VIN_VALUES[c]) * w for c, w in zip(chars, VIN_WEIGHTS, strict=True))
    chars[8] = "X" if total % 11 == 10 else str(total % 11)
    return "".join(chars)


def dated_order(rng: random.Random) -> str:
    """Order numbers that carry their date: ``<area><yyyymmdd><seq>`` and the like."""
    day = _recent(rng)
    return rng.choice(
        (
            lambda: f"{rng.choice(AREAS)}{day:%Y%m%d}{_digits(rng, 4)}",  # 18 digits, like a resident id
            lambda: f"{day:%Y%m%d}{_digits(rng, 6)}",
            lambda: f"{day:%Y%m%d%H%M%S}"[:8] + _digits(rng, 6) + _digits(rng, 4),
            lambda: f"SO{day:%Y%m%d}{_digits(rng, 6)}",
            lambda: f"{day:%y%m%d}{_digits(rng, 10)}",
        )
    )()


KINDS: dict[str, Callable[[random.Random], str]] = {
    "ERP documents": erp,
    "e-commerce orders": ecommerce,
    "platform order ids (19 digits)": platform_order,
    "16-digit ids": sixteen_digit_id,
    "15-digit ids": fifteen_digit_id,
    "tickets": ticket,
    "invoices": invoice,
    "contracts": contract,
    "GTINs": gtin,
    "tracking numbers": tracking,
    "VINs": vin,
    "dated order numbers": dated_order,
}

# Every form of personal data the issue found stored as sent (a card split in two fields is in the tests).
ISSUE_MISSES = (
    "(+86) 13800138000",
    "(+86)13800138000",
    "0086 13800138000",
    "86-138-0013-8000",
    "13800138000",
    "4111/1111/1111/1111",
    '"ana"@contoso.com',
    "ana@[10.0.0.1]",
)


def corpus(per_kind: int = PER_KIND) -> dict[str, list[str]]:
    """``per_kind`` identifiers of each kind, the same every run of the same day."""
    rng = random.Random(SEED)
    return {kind: [make(rng) for _ in range(per_kind)] for kind, make in KINDS.items()}


def _detectors(path: str | None) -> Callable[[str], list[str]]:
    if path is None:
        from oncegate.domain.sensitive import sensitive_findings

        return sensitive_findings
    spec = importlib.util.spec_from_file_location("detectors_under_test", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    found: Callable[[str], list[str]] = module.sensitive_findings
    return found


def main(argv: list[str]) -> None:
    findings = _detectors(argv[0] if argv else None)
    ids = corpus()
    total = refused = 0
    for kind, texts in ids.items():
        flagged = [text for text in texts if findings(text)]
        total, refused = total + len(texts), refused + len(flagged)
        print(f"{kind:32} {len(flagged):4}/{len(texts)}  {', '.join(flagged[:2])}")
    missed = [text for text in ISSUE_MISSES if not findings(text)]
    print(f"{'refused':32} {refused:4}/{total} ({refused / total:.2%})")
    print(f"{'issue forms missed':32} {len(missed):4}/{len(ISSUE_MISSES)}")


if __name__ == "__main__":
    main(sys.argv[1:])
