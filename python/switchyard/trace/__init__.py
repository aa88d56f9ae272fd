"""Routing traces: capture a model's routing (docs/traces.md), read and write trace
directories, and evaluate a policy offline on one (`evaluate`, the moe-eval tool)."""
from .format import PHASE_NAMES, Trace, load_trace, save_trace
from .capture import capture_hf  # torch is imported only when capturing
from .evaluate import evaluate
from .hardware import PROFILE_NAMES, profiles

__all__ = ["Trace", "load_trace", "save_trace", "PHASE_NAMES", "capture_hf", "evaluate",
           "profiles", "PROFILE_NAMES"]

