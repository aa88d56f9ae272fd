//===- SignatureBinding.cpp - a compiled entry's signature, as Python objects ---===//
//
// runtime::Signature (and its Param, Knob, KnobRule) bound as read-only classes, so
// that Python reads a loaded policy's parameters from the runtime's own structs, with
// no JSON in between: Policy.signature.
//
//===----------------------------------------------------------------------===//
#include "Bindings.h"

#include "switchyard/Runtime/Signature.h"

#include <nanobind/stl/array.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

namespace switchyard::python {

void bindSignature(nb::module_ &m) {
  using runtime::Knob;
  using runtime::KnobRule;
  using runtime::Param;
  using runtime::Signature;
  nb::class_<Param>(m, "Param", "One parameter of a compiled entry (after num_tokens).")
      .def_ro("name", &Param::name)
      .def_ro("is_output", &Param::isOutput)
      .def_ro("kind", &Param::kind, "tensor, set, scalar, placement_replicas or _log2phy")
      .def_ro("dtype", &Param::dtype)
      .def_ro("shape", &Param::shape, "-1: the dynamic dimension (see size_rule)")
      .def_ro("size_rule", &Param::sizeRule, "(a, b, d): the dimension is ceil((a*T+b)/d)")
      .def_ro("values", &Param::values, "'', 'phase' or 'expert_ids'")
      .def_ro("id_bound", &Param::idBound)
      .def("shape_for", &Param::shapeFor, nb::arg("tokens"));
  nb::class_<KnobRule>(m, "KnobRule", "A rule a knob must keep, as the entry checks it.")
      .def_ro("text", &KnobRule::text)
      .def_ro("op", &KnobRule::op);
  nb::class_<Knob>(m, "Knob", "A knob the entry takes at run time.")
      .def_ro("name", &Knob::name)
      .def_ro("dtype", &Knob::dtype, "int64 or float32")
      .def_prop_ro("default",
                   [](const Knob &k) -> nb::object {
                     if (k.isFloat())
                       return nb::float_(k.floatDefault);
                     return nb::int_(k.intDefault);
                   })
      .def_ro("rules", &Knob::rules);
  nb::class_<Signature>(m, "Signature", "What a compiled entry takes and returns.")
      .def_ro("entry", &Signature::entry)
      .def_ro("kind", &Signature::kind, "router, residency, balance or prefetch")
      .def_ro("params", &Signature::params)
      .def_ro("knobs", &Signature::knobs);
}

} // namespace switchyard::python
