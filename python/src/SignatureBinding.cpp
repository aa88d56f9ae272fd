//===- SignatureBinding.cpp - a compiled entry's signature, as Python objects ---===//
//
// runtime::Signature (and its Param, Knob, KnobRule) bound as read-only classes, so
// that Python reads a loaded policy's parameters from the runtime's own structs, with
// no JSON in between: Policy.signature. The ABI's enums are Python enums whose member
// names are the runtime's spellings (DType.bfloat16, ParamKind.placement_log2phy,
// ValueSet.expert_ids, EntryKind.balance; ValueSet.any for the unconstrained set).
//
//===----------------------------------------------------------------------===//
#include "Bindings.h"

#include "switchyard/Runtime/Signature.h"

#include <nanobind/stl/array.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

namespace switchyard::python {

/// Binds `Enum` with one member per value, named by `name(value)`.
template <typename Enum, typename Name>
static void bindEnum(nb::module_ &m, const char *pyName, const char *doc,
                     std::initializer_list<Enum> values, Name name) {
  nb::enum_<Enum> e(m, pyName, doc);
  for (Enum value : values)
    e.value(name(value), value);
}

void bindSignature(nb::module_ &m) {
  using runtime::DType;
  using runtime::EntryKind;
  using runtime::ParamKind;
  using runtime::ValueSet;
  bindEnum(m, "DType", "An element type (NumPy's names).",
           {DType::F16, DType::BF16, DType::F32, DType::F64, DType::I8, DType::U8,
            DType::I32, DType::I64, DType::Bool},
           [](DType d) { return npy::dtypeName(d); });
  bindEnum(m, "ParamKind", "What a parameter of an entry carries.",
           {ParamKind::Tensor, ParamKind::Set, ParamKind::Scalar,
            ParamKind::PlacementReplicas, ParamKind::PlacementLog2Phy},
           [](ParamKind k) { return runtime::spelling(k); });
  bindEnum(m, "ValueSet", "What an input's values may be beyond its dtype.",
           {ValueSet::Any, ValueSet::Phase, ValueSet::ExpertIds},
           [](ValueSet v) { return v == ValueSet::Any ? "any" : runtime::spelling(v); });
  bindEnum(
      m, "EntryKind", "A router, or one of the rules.",
      {EntryKind::Router, EntryKind::Residency, EntryKind::Balance, EntryKind::Prefetch},
      [](EntryKind k) { return runtime::spelling(k); });
  using runtime::Knob;
  using runtime::KnobRule;
  using runtime::Param;
  using runtime::Signature;
  nb::class_<Param>(m, "Param", "One parameter of a compiled entry (after num_tokens).")
      .def_ro("name", &Param::name)
      .def_ro("is_output", &Param::isOutput)
      .def_ro("kind", &Param::kind)
      .def_ro("dtype", &Param::dtype)
      .def_ro("shape", &Param::shape, "-1: the dynamic dimension (see size_rule)")
      .def_ro("size_rule", &Param::sizeRule, "(a, b, d): the dimension is ceil((a*T+b)/d)")
      .def_ro("values", &Param::values)
      .def_ro("id_bound", &Param::idBound)
      .def_prop_ro("is_scalar", &Param::isScalar)
      .def_prop_ro("is_set", &Param::isSet)
      .def_prop_ro("is_placement", &Param::isPlacement)
      .def_prop_ro("input_name", &Param::inputName,
                   "'placement' for both placement parameters")
      .def_prop_ro("shape_text", &Param::shapeText, "'[?, 128]' (?: the dynamic dimension)")
      .def("shape_for", &Param::shapeFor, nb::arg("tokens"))
      .def("__repr__", [](const Param &p) {
        return "<Param " + p.name + (p.isOutput ? " out " : " in ") +
               (p.isSet() ? std::string("bool") : npy::dtypeName(p.dtype)) + " " +
               p.shapeText() + ">";
      });
  nb::class_<KnobRule>(m, "KnobRule", "A rule a knob must keep, as the entry checks it.")
      .def_ro("text", &KnobRule::text)
      .def_ro("op", &KnobRule::op);
  nb::class_<Knob>(m, "Knob", "A knob the entry takes at run time.")
      .def_ro("name", &Knob::name)
      .def_ro("dtype", &Knob::dtype, "int64 or float32")
      .def_prop_ro("is_float", &Knob::isFloat)
      .def_prop_ro("default",
                   [](const Knob &k) -> nb::object {
                     if (k.isFloat())
                       return nb::float_(k.floatDefault);
                     return nb::int_(k.intDefault);
                   })
      .def_ro("rules", &Knob::rules)
      .def("__repr__", [](const Knob &k) {
        return "<Knob " + k.name + " " + npy::dtypeName(k.dtype) + " = " +
               (k.isFloat() ? std::to_string(k.floatDefault)
                            : std::to_string(k.intDefault)) +
               ">";
      });
  nb::class_<Signature>(m, "Signature", "What a compiled entry takes and returns.")
      .def_ro("entry", &Signature::entry)
      .def_ro("kind", &Signature::kind)
      .def_ro("params", &Signature::params)
      .def_ro("knobs", &Signature::knobs)
      .def_ro("knob_groups", &Signature::knobGroups)
      .def(
          "to_json", [](const Signature &s) { return runtime::toJson(s); },
          "The signature as moe-compile's manifest writes it.");
}

} // namespace switchyard::python
