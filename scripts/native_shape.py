#!/usr/bin/env python3
"""Prints the flags that bind a shipped policy to the model its header names, for
moe-opt / moe-run / moe-compile:

    moe-run policies/lynx.mlir $(python3 scripts/native_shape.py lynx) --list

The argument is a policy name or path; a file with a fixed shape prints nothing. The
shapes are policy_shapes.NATIVE_SHAPES (one table for the demo, the tests and the
benches).
"""
import os
import shlex
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "test", "support"))
import policy_shapes  # noqa: E402

if len(sys.argv) != 2:
    sys.exit("usage: native_shape.py POLICY (a name such as xshare, or a path)")
name = os.path.splitext(os.path.basename(sys.argv[1]))[0]
flags = policy_shapes.shape_flags(**policy_shapes.native_shape(name))
print(" ".join(shlex.quote(f) for f in flags))
