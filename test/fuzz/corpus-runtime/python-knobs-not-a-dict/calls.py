# switchyard called with a knobs argument that is not a mapping: a clear TypeError or
# KnobError naming `knobs` is expected, never AttributeError.
import numpy as np
import switchyard
OK = ("SwitchyardError", "CompileError", "InputError", "KnobError", "ValueError",
      "TypeError")
for what, call in (
        ("compile", lambda: switchyard.compile("topk_softmax", experts=8, top_k=2, knobs=1.5)),
        ("route", lambda: switchyard.compile("topk_softmax", experts=8, top_k=2)(
            logits=np.zeros((4, 8), np.float32), knobs="x"))):
    try:
        call()
    except Exception as e:  # noqa: BLE001
        if type(e).__name__ not in OK and not isinstance(e, switchyard.SwitchyardError):
            print("UNEXPECTED %s: %s: %s" % (type(e).__name__, what, e))
