"""Writes the parse tables of Checkov's JSONPath parsers next to them, as PLY does by default: run by Checkov's Python.

Checkov (bc_jsonpath_ng) builds PLY's LALR tables of its JSONPath grammar again for every path it parses, having
told PLY not to write them (``write_tables=0``): over ``infra/`` that is 221 builds, about 5 s of the 8 s of CPU a
scan takes. PLY reads tables it finds beside the parser's module when their signature is the grammar's, and builds
them as before when it is not (another bc_jsonpath_ng), so the scan reports the same; ``make install`` writes them
once into ``.venv/checkov``, and a Checkov without them is as slow as before and as right.
"""

from __future__ import annotations

import logging
import os

import ply.yacc
from bc_jsonpath_ng import parser
from bc_jsonpath_ng.ext import parser as extended

START = "jsonpath"


def write(grammar: parser.JsonPathParser) -> None:
    """The tables of ``grammar`` in its module's folder, under the name its ``parse`` looks them up by."""
    module = type(grammar).__module__
    folder, file = os.path.split(__import__(module, fromlist=["_"]).__file__ or "")
    table = f"{os.path.splitext(file)[0]}_{START}_parsetab"
    ply.yacc.yacc(
        module=grammar, tabmodule=table, outputdir=folder, write_tables=True, start=START, debug=False,
        errorlog=logging.getLogger(module),
    )  # fmt: skip


if __name__ == "__main__":
    write(parser.JsonPathParser())
    write(extended.ExtentedJsonPathParser())
