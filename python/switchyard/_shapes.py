"""The model sizes a policy binds to and moe-compile's flags for them. Standard library
only: test/support/policy_shapes.py loads this file without the built extension.

The parameters are the compiler's one table, ShapeParameters.def (C++ X-macro rows):
read from the copy beside this file (build tree, installed package) or from the source
tree's include/ (this file loaded from python/switchyard). The extension's
shape_parameters() is the same table as C++ compiled it; test/python/test_shape_table.py
checks the two agree."""
import ast
import os
import re

_HERE = os.path.dirname(os.path.abspath(__file__))
_DEF_NAME = "ShapeParameters.def"
_DEF_PATHS = (os.path.join(_HERE, _DEF_NAME),
              os.path.join(_HERE, "..", "..", "include", "switchyard", "Dialect", "Moe",
                           _DEF_NAME))
# SHAPE_PARAMETER(FIELD, KIND, NAME, FLAG, VALUE_DESC, CONFIG_KEYS, PARAM, USES, HELP)
_COLUMNS = ("field", "kind", "name", "flag", "value_desc", "config_keys", "param", "uses",
            "help")
_ARGUMENT = re.compile(r'\s*("(?:[^"\\]|\\.)*"|[A-Za-z0-9_]+)\s*(,|\)\s*$)')


def _parse_row(line, where):
    """One `SHAPE_PARAMETER(...)` line as a dict of _COLUMNS."""
    rest = line[len("SHAPE_PARAMETER("):]
    values = []
    while rest:
        m = _ARGUMENT.match(rest)
        if not m:
            raise ImportError(f"{where}: cannot read this row: {line}")
        token = m.group(1)
        values.append(ast.literal_eval(token) if token.startswith('"') else token)
        rest = rest[m.end():]
    if len(values) != len(_COLUMNS):
        raise ImportError(f"{where}: {len(values)} columns, expected {len(_COLUMNS)}")
    row = dict(zip(_COLUMNS, values))
    row["config_keys"] = tuple(row["config_keys"].split())
    row["param"] = row["param"] != "0"
    return row


def _read_table():
    for path in _DEF_PATHS:
        if os.path.isfile(path):
            break
    else:
        raise ImportError("switchyard: the shape parameter table is missing (looked for "
                          + " and ".join(os.path.normpath(p) for p in _DEF_PATHS) + ")")
    rows = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if line.startswith("SHAPE_PARAMETER("):
                rows.append(_parse_row(line.rstrip("\n"), f"{path}:{number}"))
    if not rows:
        raise ImportError(f"{path}: no SHAPE_PARAMETER rows")
    return tuple(rows)


# Every shape parameter: dicts of name (the keyword), kind ("Int", "Number", "Bool"),
# flag, config_keys, help, ... (ShapeParameters.def's columns).
SHAPE_TABLE = _read_table()

# moe-compile's shape flags (--experts, --top-k, ...), as keywords.
SHAPE_PARAMS = tuple(row["name"] for row in SHAPE_TABLE)
_FLAGS = {row["name"]: "--" + row["flag"] for row in SHAPE_TABLE}


def shape_flags(shape, error=ValueError, also=(), hint=""):
    """The tools' flags for a shape binding (experts=128 -> --experts 128, a bool ->
    --flag=true); None values are left out. A name outside SHAPE_PARAMS + `also` raises
    `error` listing the known names (then `hint`)."""
    known = SHAPE_PARAMS + tuple(also)
    flags = []
    for name, value in shape.items():
        if name not in known:
            raise error(f"unknown shape parameter '{name}' (expected one of "
                        f"{', '.join(known)}{hint})")
        if value is None:
            continue
        flag = _FLAGS.get(name, "--" + name.replace("_", "-"))
        if isinstance(value, bool):
            flags.append(f"{flag}={'true' if value else 'false'}")
        else:
            flags += [flag, str(value)]
    return flags
