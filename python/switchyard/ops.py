"""The router as a torch custom op, `torch.ops.switchyard.route`, with a fake (meta)
implementation, so a Router works under torch.compile (no graph break: the op is one
node whose output shapes come from the policy's signature) and in CUDA graphs.

You rarely call it yourself: a Router called inside torch.compile dispatches to it.
Explicitly:

    ids, weights = switchyard.ops.route(router, logits=x)  # results in router.outputs order

Op schema: route(str key, Tensor[] tensors, int[] scalars, str knobs) -> Tensor[]
(key names a Router registered when it was created; tensors are its tensor inputs and
scalars its scalar inputs, each in declaration order; knobs "name=value" settings joined
by newlines; results in selection order).
"""
from typing import List

import torch

from ._op_keys import router_for
from ._torch import result_dtype


def register(router) -> str:
    """The op key of `router` (every Router has one from when it was made)."""
    return router.op_key


def _inputs(router, tensors: List[torch.Tensor], scalars: List[int]):
    inputs = dict(zip(router.tensor_inputs, tensors))
    inputs.update(zip(router.scalar_inputs, scalars))
    return inputs


@torch.library.custom_op("switchyard::route", mutates_args=())
def _route(key: str, tensors: List[torch.Tensor], scalars: List[int],
           knobs: str) -> List[torch.Tensor]:
    router = router_for(key)
    out = router.run(_inputs(router, tensors, scalars), knobs.split("\n") if knobs else [])
    return [out[p.name] for p in router.selected_params]


@_route.register_fake
def _route_fake(key, tensors, scalars, knobs):
    router = router_for(key)
    index = router.tensor_inputs.index(router.token_inputs[0]) \
        if router.token_inputs else 0
    tokens = tensors[index].shape[0] if tensors else 0
    device = tensors[0].device if tensors else torch.device("cpu")
    return [torch.empty(router.result_shape(p, tokens), dtype=result_dtype(p), device=device)
            for p in router.selected_params]


def route(router, *, knobs=None, **inputs) -> List[torch.Tensor]:
    """Calls `router` through the custom op: its results, in `router.outputs` order of
    the selected results."""
    key = register(router)
    tensors = [inputs[n] for n in router.tensor_inputs]
    scalars = [int(inputs[n]) for n in router.scalar_inputs]
    settings = router.settings(knobs)
    return torch.ops.switchyard.route(key, tensors, scalars, "\n".join(settings))
