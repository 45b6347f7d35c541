"""Shared helpers of the migration tools: parse a migration, apply it to a schema, and the
dry-run record (.migrate/dryrun.json) that applying and queueing require."""

import hashlib
import json
import re
import secrets
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROD_DB = ROOT / "prod" / "orders_db.json"
PROD_LOG = ROOT / "prod" / "migrations.log"
PROD_ACCESS = ROOT / "prod" / "access.log"
RECORD = ROOT / ".migrate" / "dryrun.json"

ADD_COLUMN = re.compile(r"(?is)^ALTER\s+TABLE\s+(\w+)\s+ADD\s+COLUMN\s+(\w+)\s+(\w+)$")
CREATE_INDEX = re.compile(r"(?is)^CREATE\s+INDEX\s+(\w+)\s+ON\s+(\w+)\s*\(\s*(\w+)\s*\)$")


class MigrationError(Exception):
    pass


def load(path):
    """(name, sha256, statements) of the migration file at ``path``."""
    file = (ROOT / path) if not Path(path).is_absolute() else Path(path)
    if not file.is_file():
        raise MigrationError(f"no migration file {path}")
    data = file.read_bytes()
    text = "\n".join(line.split("--", 1)[0] for line in data.decode("utf-8").splitlines())
    statements = [s.strip() for s in text.split(";") if s.strip()]
    if not statements:
        raise MigrationError(f"{path} holds no statement")
    return file.stem, hashlib.sha256(data).hexdigest(), statements


def apply(schema, name, statements):
    """The schema with the statements applied (a new dict); lines describing each change."""
    schema = json.loads(json.dumps(schema))
    if name in schema["applied"]:
        raise MigrationError(f"{name} is already applied")
    changes = []
    for stmt in statements:
        col, idx = ADD_COLUMN.match(stmt), CREATE_INDEX.match(stmt)
        if col:
            table, column, kind = col.groups()
            cols = schema["tables"].get(table, {}).get("columns")
            if cols is None:
                raise MigrationError(f"unknown table {table!r}")
            if column in cols:
                raise MigrationError(f"column {table}.{column} exists already")
            cols[column] = kind.upper()
            changes.append(f"+ column {table}.{column} {kind.upper()}")
        elif idx:
            index, table, column = idx.groups()
            spec = schema["tables"].get(table)
            if spec is None:
                raise MigrationError(f"unknown table {table!r}")
            if column not in spec["columns"]:
                raise MigrationError(f"unknown column {table}.{column}")
            if index in spec["indexes"]:
                raise MigrationError(f"index {index} exists already")
            spec["indexes"][index] = [column]
            changes.append(f"+ index {index} ON {table}({column})")
        else:
            raise MigrationError(f"unsupported statement: {stmt[:60]!r}")
    schema["applied"].append(name)
    return schema, changes


def prod_schema():
    return json.loads(PROD_DB.read_text(encoding="utf-8"))


def new_plan_id():
    return "PLN-" + secrets.token_hex(4).upper()


def write_record(record):
    RECORD.parent.mkdir(exist_ok=True)
    RECORD.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")


def passing_record(name, sha256):
    """The dry-run record for exactly this migration file, or raise."""
    try:
        record = json.loads(RECORD.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise MigrationError(f"no dry-run record for {name}: run tools/apply_migration.py --dry-run first") from None
    if record.get("migration") != name or record.get("sha256") != sha256 or record.get("passed") is not True:
        raise MigrationError(f"the dry-run record does not cover this version of {name}: run --dry-run again")
    return record
