"""Torch tensors in and out of a Router: DLPack with no copy, results allocated by torch,
CUDA launches on the current torch stream. Imported only when a tensor is passed."""
import weakref
from typing import Any, Dict, List

import torch

from ._errors import InputError
from ._switchyard import DType

#: The torch dtype of each element type of the ABI.
TORCH_DTYPES = {DType.float32: torch.float32, DType.int32: torch.int32,
                DType.int64: torch.int64, DType.bfloat16: torch.bfloat16,
                DType.float16: torch.float16}


def result_dtype(param) -> torch.dtype:
    """The torch dtype of a result parameter's tensor (a set's: bool)."""
    return torch.bool if param.is_set else TORCH_DTYPES[param.dtype]


def _prepare(router, name: str, value: Any, device: torch.device):
    if isinstance(value, int) and name in router.scalar_inputs:
        return value
    if not isinstance(value, torch.Tensor):
        value = torch.as_tensor(value, device=device)
    if value.device != device:
        raise InputError(f"argument '{name}': on {value.device}, but the call's tensors are "
                         f"on {device}")
    if value.requires_grad:
        value = value.detach()
    if device.type == "cuda":
        # Device memory must already have the entry's dtype: convert on the GPU (only
        # ever widen: an input compiled bfloat16 / float16 takes exactly that dtype,
        # which the runtime checks; narrowing float32 would round).
        if value.is_floating_point() and value.dtype != torch.float32 and \
                router.input_dtypes.get(name, DType.float32) == DType.float32:
            value = value.float()
        elif value.dtype in (torch.int64, torch.int16, torch.int8, torch.uint8) and \
                name != "placement":
            value = value.int()
    return value.contiguous()


# CPU tensors of these dtypes reach the runtime as NumPy views of the same memory
# (Tensor.numpy() is a view): about 3 us per tensor cheaper than Tensor.__dlpack__.
_NUMPY_VIEWABLE = (torch.float32, torch.int32, torch.int64, torch.bool, torch.uint8,
                   torch.float16)


def _host_view(value):
    if isinstance(value, torch.Tensor) and value.dtype in _NUMPY_VIEWABLE:
        return value.numpy()
    return value


# Each Router's (tokens, selected only) -> result specs; dropped with the Router.
_result_specs_cache: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _result_specs(router, tokens: int, selected: bool):
    """(name, shape, dtype) of each result (the selected ones, or all) for `tokens`
    tokens, cached per router."""
    cache = _result_specs_cache.get(router)
    if cache is None:
        cache = _result_specs_cache[router] = {}
    specs = cache.get((tokens, selected))
    if specs is None:
        params = router.selected_params if selected else router.result_params
        specs = [(p.name, router.result_shape(p, tokens), result_dtype(p)) for p in params]
        if len(cache) > 64:
            cache.clear()
        cache[(tokens, selected)] = specs
    return specs


def call(router, inputs: Dict[str, Any], settings: List[str], example: torch.Tensor):
    device = example.device
    tensors = {name: _prepare(router, name, value, device) for name, value in inputs.items()}
    tokens = router.tokens(tensors)
    cpu = device.type == "cpu"
    specs = _result_specs(router, tokens, selected=cpu)
    outputs = {name: torch.empty(shape, dtype=dtype, device=device)
               for name, shape, dtype in specs}
    if cpu:
        if router.target != "host":
            raise InputError(f"@{router.entry} was compiled for {router.target}: CPU "
                             "tensors need target='host'")
        # torch allocated the results; the compiled code writes into their memory.
        router.native.run({n: _host_view(v) for n, v in tensors.items()},
                           {n: v.numpy() for n, v in outputs.items()}, settings)
        return outputs
    if device.type != "cuda":
        raise InputError(f"tensors on {device} are not supported (CPU or CUDA)")
    if router.target != "cuda":
        raise InputError(f"@{router.entry} was compiled for the host: CUDA tensors need "
                         "target='cuda'")
    with torch.cuda.device(device):
        workspace = torch.empty(max(router.native.workspace_bytes(tokens), 1),
                                dtype=torch.uint8, device=device)
        knobs = device_knobs(router, settings, device)
        # Scalar inputs (the phase) in device memory, which the kernels read.
        scalars = {name: torch.tensor([int(value)],
                                      dtype=TORCH_DTYPES[router.input_dtypes[name]],
                                      device=device)
                   for name, value in tensors.items() if name in router.scalar_inputs}
        stream = torch.cuda.current_stream(device).cuda_stream
        router.native.launch(tensors, outputs,
                              {name: t.data_ptr() for name, t in scalars.items()},
                              knobs.data_ptr() if knobs is not None else 0,
                              workspace.data_ptr(), stream)
    return {p.name: outputs[p.name] for p in router.selected_params}


def device_knobs(router, settings: List[str], device: torch.device):
    """The knob struct for `settings` (checked against the knobs' rules) in device
    memory, which the kernels read when they run; None (the defaults) when nothing is
    set. The tensor must live until the launch has run: the caching allocator keeps it
    for the stream."""
    if not settings:
        return None
    raw = router.native.knob_struct(settings)
    return torch.frombuffer(bytearray(raw), dtype=torch.uint8).to(device, non_blocking=True)
