"""`planner schema`: the JSON Schema of the documents (platform, profile, request, plan)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from planner.core.asymo_schema import DOCUMENTS as ASYMO_DOCUMENTS
from planner.core.schema import DOCUMENTS as CORE_DOCUMENTS

DOCUMENTS = {**CORE_DOCUMENTS, **ASYMO_DOCUMENTS}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("schema", help="print or write the JSON Schemas", description=__doc__)
    p.add_argument("document", nargs="?", choices=sorted(DOCUMENTS), help="one document (default: all)")
    p.add_argument("--out", metavar="DIR", help="write <document>.schema.json files here")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    names = [args.document] if args.document else sorted(DOCUMENTS)
    schemas = {n: DOCUMENTS[n].model_json_schema() for n in names}
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        for n, s in schemas.items():
            (out / f"{n}.schema.json").write_text(json.dumps(s, indent=2) + "\n")
            print(out / f"{n}.schema.json")
    else:
        print(json.dumps(schemas[names[0]] if args.document else schemas, indent=2))
    return 0
