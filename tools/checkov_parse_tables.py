"""Write the JSONPath grammar's parse tables into checkov's tool environment (.tools/checkov), once,
at its install: run by the Makefile with that environment's python.

checkov renders a template's ``Fn::Sub`` and pseudo parameters through bc-jsonpath-ng, whose
parsers call ``ply.yacc.yacc(..., write_tables=0)`` on every path they parse: PLY looks for the
tables module first and, finding none, builds the LALR tables of the grammar anew each time. Over
our expanded template that was half of a checkov run. PLY's own cache is the fix: ``yacc()`` with
``write_tables=1`` and the same ``tabmodule`` and ``outputdir`` writes the module that every later
``yacc()`` reads; PLY checks the module's grammar signature before it uses it and builds the tables
again if they differ, so a stale file costs time, never a wrong parse."""

from __future__ import annotations

import logging
from pathlib import Path

import ply.yacc
from bc_jsonpath_ng import parser
from bc_jsonpath_ng.ext import parser as ext_parser

START = "jsonpath"  # the start symbol both parsers use


def write_tables() -> list[Path]:
    """Build and write the tables of both parsers (the plain and the extended grammar) where their
    ``parse_token_stream`` looks for them; the paths written."""
    written = []
    grammars = ((parser, parser.JsonPathParser()), (ext_parser, ext_parser.ExtentedJsonPathParser()))
    for module, grammar in grammars:
        source = Path(module.__file__ or "")
        tabmodule = f"{source.stem}_{START}_parsetab"
        ply.yacc.yacc(
            module=grammar,
            tabmodule=tabmodule,
            outputdir=str(source.parent),
            write_tables=1,
            debug=False,
            start=START,
            errorlog=logging.getLogger("ply"),
        )
        written.append(source.parent / f"{tabmodule}.py")
    missing = [str(path) for path in written if not path.exists()]
    if missing:
        raise SystemExit(f"PLY wrote no parse tables at {', '.join(missing)}")
    return written


if __name__ == "__main__":
    for path in write_tables():
        print(f"wrote {path}")
