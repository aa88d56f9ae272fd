"""The model sizes a policy binds to and moe-compile's flags for them. Standard library
only: scripts/policy_shapes.py loads this file without the built extension."""

# moe-compile's shape flags (--experts, --top-k, ...), as keywords.
SHAPE_PARAMS = ("experts", "top_k", "groups", "topk_groups", "devices", "slots", "nodes",
                "hidden_size", "shared_experts", "scaling", "norm_topk_prob")


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
        flag = "--" + name.replace("_", "-")
        if isinstance(value, bool):
            flags.append(f"{flag}={'true' if value else 'false'}")
        else:
            flags += [flag, str(value)]
    return flags
