"""Write the generated documentation: spec JSON Schemas, spec reference pages, CLI reference.

    python scripts/gen_docs.py           # (re)write them under docs/
    python scripts/gen_docs.py --check   # exit 1 naming each file that is stale or missing

Run from anywhere with the repository on ``PYTHONPATH``. Outputs:

- ``docs/schemas/<kind>.json``: ``trainctl schema <kind>`` for train, operation, campaign and
  slurm-config;
- ``docs/reference/<kind>-spec.md``: each spec's fields, from its pydantic model;
- ``docs/reference/cli.md``: every command, from the click commands.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from docgen_cli import cli_page  # noqa: E402
from docgen_specs import spec_page  # noqa: E402

from orchestrator.app.cli import main  # noqa: E402
from orchestrator.app.cli.schema import SPEC_MODELS, spec_schema  # noqa: E402


def outputs() -> dict[Path, str]:
    """Every generated file (path under the repository) and the text it must hold."""
    files: dict[Path, str] = {}
    for kind, (model, what) in SPEC_MODELS.items():
        schema = spec_schema(kind)
        files[Path("docs/schemas") / f"{kind}.json"] = json.dumps(schema, indent=2) + "\n"
        files[Path("docs/reference") / f"{kind}-spec.md"] = spec_page(kind, what, model, schema)
    files[Path("docs/reference/cli.md")] = cli_page(main)
    return files


def stale(root: Path = ROOT) -> list[str]:
    """The generated files under ``root`` whose text differs from what the code makes."""
    return [
        str(path)
        for path, text in outputs().items()
        if not (root / path).is_file() or (root / path).read_text() != text
    ]


def main_(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="Change nothing; exit 1 if stale.")
    args = parser.parse_args(argv)
    if args.check:
        old = stale()
        for path in old:
            print(f"{path}: stale; run python scripts/gen_docs.py", file=sys.stderr)
        return 1 if old else 0
    for path, text in outputs().items():
        (ROOT / path).parent.mkdir(parents=True, exist_ok=True)
        (ROOT / path).write_text(text)
    print(f"wrote {len(outputs())} files under docs/")
    return 0


if __name__ == "__main__":
    sys.exit(main_())
