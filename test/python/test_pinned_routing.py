#!/usr/bin/env python3
"""Requests pinned to the model's own routing inside a batch-aware step (ctest
python/pinned-routing; no vLLM needed):

- a step router bound with a pinned router (switchyard.vllm.bind(..., pinned=)) routes
  the metadata's `pinned_rows` with it: those rows get exactly the ids and weights the
  model's own routing gives them alone, bit for bit, whatever their batch-mates; the
  other rows get the policy's routing of them as a batch of their own (they are one
  group), and knob groups still apply beside the pinned rows;
- a router bound without one refuses pinned rows naming the setting;
- a pinned router must take the same experts and k, and no layer input the policy's
  router is not given;
- the request check takes `switchyard.route` = "policy" / "model" only, and the
  server's middleware refuses a JSON boolean for it.

Usage: test/python/test_pinned_routing.py --build BUILD
"""
import argparse
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "test", "support"))
from checks import Checks  # noqa: E402
from policy_shapes import import_switchyard  # noqa: E402

E, K, T = 16, 4, 12


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--build", required=True)
    args = parser.parse_args()
    sy = import_switchyard(args.build)
    import torch
    from switchyard.vllm import bind
    from switchyard.vllm.knobs import check_request
    from switchyard.vllm.middleware import refused_knob
    check = Checks()
    rng = np.random.default_rng(7)
    logits = torch.from_numpy(rng.standard_normal((T, E)).astype(np.float32) * 2)
    model = bind("topk_softmax", experts=E, top_k=K)
    policy = bind("xshare", experts=E, top_k=K, pinned=model, knobs={"budget": 6})
    unpinned = bind("xshare", experts=E, top_k=K, knobs={"budget": 6})
    pinned_rows = np.array([2, 3, 7, 11])
    rest = np.setdiff1d(np.arange(T), pinned_rows)

    def route(step, rows=None, **metadata):
        x = logits if rows is None else logits[rows]
        with sy.batch_metadata(request_ids=np.zeros(len(x), np.int32), **metadata):
            weights, ids = step(x, [])
        return ids.numpy(), weights.numpy()

    def same(a, b):
        return a[0].tobytes() == b[0].tobytes() and a[1].tobytes() == b[1].tobytes()

    ids, weights = route(policy, pinned_rows=pinned_rows)
    alone = route(model, pinned_rows)
    check("pinned rows: the model's own routing of them alone, bit for bit",
          same((ids[pinned_rows], weights[pinned_rows]), alone))
    others = route(unpinned, rest)
    check("the other rows: the policy's routing of them as a batch of their own",
          same((ids[rest], weights[rest]), others))
    check("a batch-aware policy differs from the model's routing on this batch (the test "
          "can fail)", not same(route(policy), route(model)))
    # The pinned rows in another batch: only 2 and 3 pinned, among other logits.
    mixed = torch.cat([logits[[2, 3]], torch.from_numpy(
        rng.standard_normal((5, E)).astype(np.float32))])
    with sy.batch_metadata(request_ids=np.zeros(7, np.int32), pinned_rows=[0, 1]):
        w2, i2 = policy(mixed, [])
    check("pinned rows are batch-invariant: rows 2, 3 in another batch, the same bits",
          same((i2.numpy()[:2], w2.numpy()[:2]), (ids[[2, 3]], weights[[2, 3]])))
    groups = [(np.array([0, 1]), {"budget": 2})]
    gi, gw = route(policy, pinned_rows=pinned_rows, knob_groups=groups)
    check("knob groups beside pinned rows: the group's rows by its knobs, pinned rows "
          "pinned", same((gi[[0, 1]], gw[[0, 1]]),
                         route(bind("xshare", experts=E, top_k=K, knobs={"budget": 2}),
                               [0, 1]))
          and same((gi[pinned_rows], gw[pinned_rows]), alone))

    def error_of(fn):
        try:
            fn()
        except Exception as error:  # noqa: BLE001 - the message is what is checked
            return f"{type(error).__name__}: {error}"
        return None

    message = error_of(lambda: route(unpinned, pinned_rows=pinned_rows))
    check(f"no pinned router: the pinned rows refused ({message})",
          message is not None and "switchyard.route" in message)
    message = error_of(lambda: bind("xshare", experts=E, top_k=2,
                                    pinned=bind("topk_softmax", experts=E, top_k=4)))
    check(f"a pinned router of another k refused ({message})",
          message is not None and "top-4" in message)
    message = error_of(lambda: bind("xshare", experts=E, top_k=K, pinned=bind(
        "deepseek_v3", experts=E, top_k=K, groups=4, topk_groups=2, layer_inputs=("bias",))))
    check(f"a pinned router taking a layer input the policy is not given refused "
          f"({message})", message is not None and "'bias'" in message)

    xshare = sy.compile("xshare", experts=E, top_k=K)
    for value, ok in (("model", True), ("policy", True), ("Model", False), (1, False),
                      (True, False)):
        message = error_of(lambda: check_request(xshare, {"switchyard.route": value}))
        check(f"switchyard.route = {value!r}: {'taken' if ok else message}",
              (message is None) == ok and (ok or "switchyard.route" in message))
    message = refused_knob(b'{"vllm_xargs": {"switchyard.route": true}}')
    check(f"the server's middleware: a boolean route refused ({message})",
          message is not None and '"policy" or "model"' in message)
    check("the middleware passes a body without the prefix unparsed",
          refused_knob(b'{"prompt": "x", "vllm_xargs": {"budget": true}}') is None)
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
