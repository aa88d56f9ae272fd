#!/usr/bin/env python3
"""Knob values, strict on every channel, with messages of bounded size (ctest
python/knob-values; no vLLM needed: the plugin's modules are imported without it).

- a router's knobs (compile(knobs=) and freeze_knobs, a call's knobs=, the request
  check the plugin adds to vLLM): an integer knob refuses a bool, a string ("8",
  "8\\x00junk"), a float (8.0) and integers outside int64; a float knob refuses NaN,
  infinities and bools and takes an integer; a name that differs only in case says
  which knob it means; the policy's rule names the knob as the user wrote it;
- a request's extra_args: a key whose prefix is spelled in another case is refused with
  the right spelling; an out-of-range integer names the knob;
- SWITCHYARD_KNOBS and the knobs file: bools, strings, NaN / Infinity literals refused,
  errors name their source; an empty knobs file is an error;
- every message quotes at most about 100 characters of a 1 MB name or value;
- the knobs file: a rewrite of the same size and modification time is still seen;
  each applied reload is logged once at INFO, a bad file as an error naming it, the
  last good knobs kept.

Usage: test/python/test_knob_values.py --build BUILD
"""
import argparse
import logging
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "test", "support"))
from checks import Checks  # noqa: E402
from policy_shapes import import_switchyard  # noqa: E402

BOUND = 400   # a message about a 1 MB value stays this short


def error_of(fn):
    """The message of the SwitchyardError fn() raises; None when it raises none."""
    from switchyard import SwitchyardError
    try:
        fn()
    except SwitchyardError as error:
        return str(error)
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--build", required=True)
    args = parser.parse_args()
    sy = import_switchyard(args.build)
    import numpy as np
    from switchyard.vllm import knobs as request_check
    from switchyard.vllm.batch import EngineKnobs
    from switchyard.vllm.settings import parse_knobs
    check = Checks()
    xshare = sy.compile("xshare", experts=16, top_k=4)
    lynx = sy.compile("lynx", experts=16, top_k=4)
    logits = np.random.default_rng(1).standard_normal((4, 16)).astype(np.float32)
    huge = "x" * (1 << 20)

    def refused(label, fn, *needles):
        message = error_of(fn)
        ok = message is not None and all(n in message for n in needles) \
            and len(message) < BOUND
        check(f"{label}: {message!r}"[:300], ok, f"(wanted {needles})")

    def call(router, knobs):
        inputs = {"logits": logits, "phase": 1} if "phase" in router.inputs else {"logits": logits}
        return lambda: router(**inputs, knobs=knobs)
    refused("integer knob, a bool", call(xshare, {"budget": True}), "'budget'",
            "the boolean true")
    refused("integer knob, a string", call(xshare, {"budget": "8"}), "the string '8'")
    refused("integer knob, a string with a NUL", call(xshare, {"budget": "8\x00junk"}),
            "the string")
    refused("integer knob, a float", call(xshare, {"budget": 8.0}), "the number 8.0")
    refused("integer knob past int64", call(xshare, {"budget": 2 ** 64}), "'budget'",
            "64-bit")
    refused("float knob, NaN", call(lynx, {"alpha": float("nan")}), "'alpha'", "finite")
    refused("float knob, a bool", call(lynx, {"alpha": False}), "the boolean false")
    check("float knob, an integer is taken",
          error_of(call(lynx, {"alpha": 3})) is None)
    refused("a name in another case", call(xshare, {"Budget": 3}), "did you mean 'budget'")
    refused("a 1 MB name", call(xshare, {huge: 3}), "characters)")
    refused("a 1 MB string value", call(xshare, {"budget": huge}), "characters)")
    refused("compile(knobs=) checks too",
            lambda: sy.compile("xshare", experts=16, top_k=4, knobs={"budget": True}),
            "the boolean true")
    refused("compile(freeze_knobs=True) checks the frozen values' types",
            lambda: sy.compile("xshare", experts=16, top_k=4, knobs={"budget": True},
                               freeze_knobs=True), "freeze_knobs", "the boolean true")
    refused("freeze_knobs refuses a per-layer list",
            lambda: sy.compile("xshare", experts=16, top_k=4, knobs={"budget": [1, 2]},
                               freeze_knobs=True), "'budget'", "per-layer")
    check("freeze_knobs compiles a number in",
          error_of(lambda: sy.compile("xshare", experts=16, top_k=4, knobs={"budget": 3},
                                      freeze_knobs=True)) is None)
    refused("the rule names the knob as written", call(xshare, {"set_budget": 99}),
            "set_budget must be in [0, 16]", "min_size of moe.fill")

    refused("extra_args: the prefix in another case",
            lambda: request_check.check_request(xshare, {"Switchyard.budget": 3}),
            "did you mean 'switchyard.budget'")
    refused("extra_args: an integer past int64",
            lambda: request_check.check_request(xshare, {"switchyard.budget": 10 ** 30}),
            "'budget'", "64-bit")
    refused("extra_args: a 1 MB key",
            lambda: request_check.check_request(xshare, {"switchyard." + huge: 1}),
            "characters)")
    check("extra_args: a valid knob passes",
          error_of(lambda: request_check.check_request(xshare, {"switchyard.budget": 3}))
          is None)

    refused("SWITCHYARD_KNOBS: a bool", lambda: parse_knobs('{"budget": true}'),
            "SWITCHYARD_KNOBS", "the boolean true")
    refused("SWITCHYARD_KNOBS: NaN", lambda: parse_knobs('{"alpha": NaN}'),
            "SWITCHYARD_KNOBS", "NaN")
    refused("SWITCHYARD_KNOBS: 1 MB of garbage", lambda: parse_knobs("{" + huge),
            "not JSON")
    refused("knobs file: empty", lambda: parse_knobs(" \n", "knobs.json", allow_empty=False),
            "knobs.json", "empty")

    # The knobs file as the plugin reads it: content compared, reloads logged.
    records = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record)

    logger = logging.getLogger("vllm.switchyard")
    logger.addHandler(Keep())
    logger.setLevel(logging.INFO)
    path = os.path.join(tempfile.mkdtemp(prefix="sy-knobs-"), "knobs.json")

    def write(text, stamp=None):
        with open(path, "w") as f:
            f.write(text)
        if stamp is not None:
            os.utime(path, ns=(stamp, stamp))
        time.sleep(EngineKnobs.RECHECK_SECONDS * 2)

    write('{"budget": 4}', stamp=10 ** 18)
    engine = EngineKnobs(path)
    check("knobs file: read", engine.current() == {"budget": 4})
    write('{"budget": 5}', stamp=10 ** 18)   # same size, same mtime
    check("knobs file: a same-size rewrite in the same mtime tick is seen",
          engine.current() == {"budget": 5})
    infos = [r for r in records if r.levelno == logging.INFO]
    check("knobs file: each applied reload logged once at INFO, naming the file",
          len(infos) == 2 and all(path in r.getMessage() for r in infos),
          [r.getMessage() for r in infos])
    check("knobs file: an unchanged file is not logged again",
          engine.current() == {"budget": 5} and len(records) == 2)
    write("")
    check("knobs file: an empty file keeps the last good knobs",
          engine.current() == {"budget": 5})
    errors = [r for r in records if r.levelno == logging.ERROR]
    check("knobs file: the empty file logged as an error naming it",
          len(errors) == 1 and path in errors[0].getMessage() and "empty"
          in errors[0].getMessage(), [r.getMessage() for r in errors])
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
