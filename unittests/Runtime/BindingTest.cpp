//===- BindingTest.cpp - signatures and buffers bound by name -------------===//
//
// The runtime side of a compiled entry's C ABI: Signature's JSON form (what
// moe-compile writes into manifest.json) and CallBuffers, which binds inputs by name,
// checks them against the signature and lays out the outputs for the token count.
//
//===----------------------------------------------------------------------===//
#include "switchyard/Runtime/Binding.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

// A namespace of its own: unity builds put several test files in one
// translation unit (scripts/build-sanitized.sh).
namespace binding_test {

using namespace switchyard;
using namespace switchyard::runtime;

namespace {

Param param(std::string name, bool out, ParamKind kind, DType dtype,
            std::vector<int64_t> shape, std::array<int64_t, 3> rule = {1, 0, 1}) {
  Param p;
  p.name = std::move(name);
  p.isOutput = out;
  p.kind = kind;
  p.dtype = dtype;
  p.shape = std::move(shape);
  p.sizeRule = rule;
  return p;
}

Param phase() {
  Param p = param("phase", false, ParamKind::Scalar, DType::I32, {});
  p.values = ValueSet::Phase;
  return p;
}

/// A router like policies/xshare_ep.mlir at E = 4: logits [T, 4], a placement over 4
/// experts with up to 2 replicas, a phase, and three outputs (one block-aligned).
Signature router() {
  Signature s;
  s.entry = "toy";
  s.kind = EntryKind::Router;
  s.params = {
      param("logits", false, ParamKind::Tensor, DType::F32, {-1, 4}),
      param("placement.replica_count", false, ParamKind::PlacementReplicas, DType::I32,
            {4}),
      param("placement.log2phy", false, ParamKind::PlacementLog2Phy, DType::I32, {4, 2}),
      phase(),
      param("topk_ids", true, ParamKind::Tensor, DType::I32, {-1, 2}),
      param("selected", true, ParamKind::Set, DType::I8, {4}),
      param("sorted_token_ids", true, ParamKind::Tensor, DType::I32, {-1}, {2, 12, 1})};
  return s;
}

npy::Array f32(std::vector<int64_t> shape, float fill) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  std::vector<float> data(n, fill);
  return npy::makeF32(shape, data.data());
}

npy::Array i32(std::vector<int64_t> shape, std::vector<int32_t> data) {
  return npy::makeI32(shape, data.data());
}

TEST(Signature, JsonRoundTrip) {
  Signature s = router();
  Signature back;
  std::string error;
  ASSERT_TRUE(fromJson(toJson(s), back, error)) << error;
  EXPECT_EQ(back.entry, "toy");
  EXPECT_EQ(back.kind, EntryKind::Router);
  ASSERT_EQ(back.params.size(), s.params.size());
  for (size_t i = 0; i < s.params.size(); ++i) {
    EXPECT_EQ(back.params[i].name, s.params[i].name);
    EXPECT_EQ(back.params[i].isOutput, s.params[i].isOutput);
    EXPECT_EQ(back.params[i].kind, s.params[i].kind);
    EXPECT_EQ(back.params[i].dtype, s.params[i].dtype);
    EXPECT_EQ(back.params[i].shape, s.params[i].shape);
    EXPECT_EQ(back.params[i].sizeRule, s.params[i].sizeRule);
    EXPECT_EQ(back.params[i].values, s.params[i].values);
  }
  EXPECT_EQ(back.inputNames(), (std::vector<std::string>{"logits", "placement", "phase"}));
  EXPECT_EQ(back.knobGroups, 0);
  s.knobGroups = 4; // a GPU entry compiled with --knob-groups=4
  ASSERT_TRUE(fromJson(toJson(s), back, error)) << error;
  EXPECT_EQ(back.knobGroups, 4);
}

TEST(Signature, KnobGroupsOutsideTheirRangeAreRefused) {
  Signature s;
  std::string error;
  for (const char *groups : {"0", "65", "2.5", "\"4\""}) {
    std::string text =
        std::string(R"({"entry": "x", "kind": "router", "params": [], "knob_groups": )") +
        groups + "}";
    EXPECT_FALSE(fromJson(text, s, error)) << groups;
    EXPECT_NE(error.find("'knob_groups' must be an integer in [1, 64]"), std::string::npos)
        << error;
  }
}

TEST(Signature, MalformedJsonNamesTheField) {
  Signature s;
  std::string error;
  EXPECT_FALSE(fromJson("{", s, error));
  EXPECT_NE(error.find("not a JSON object"), std::string::npos);
  EXPECT_FALSE(
      fromJson(R"({"entry": "x", "kind": "router", "params": [{"name": 1}]})", s, error));
  EXPECT_NE(error.find("params[0]: 'name'"), std::string::npos) << error;
  EXPECT_FALSE(fromJson(R"({"entry": "x", "kind": "router", "params": [{"name": "a",
      "role": "in", "kind": "tensor", "dtype": "float32", "shape": [-1],
      "size_rule": [1, 0, 0]}]})",
                        s, error));
  EXPECT_NE(error.find("size_rule"), std::string::npos) << error;
}

// Kinds, dtypes and value sets are enums: a spelling outside them is refused, named.
TEST(Signature, UnknownSpellingsAreRefused) {
  auto entry = [](const std::string &kind, const std::string &param) {
    return R"({"entry": "x", "kind": ")" + kind + R"(", "params": [{"name": "a",
        "role": "in", )" +
           param + R"(, "shape": [-1], "size_rule": [1, 0, 1]}]})";
  };
  Signature s;
  std::string error;
  EXPECT_TRUE(fromJson(entry("balance", R"("kind": "set", "dtype": "int8")"), s, error))
      << error;
  EXPECT_EQ(s.kind, EntryKind::Balance);
  EXPECT_TRUE(s.params[0].isSet());
  EXPECT_FALSE(
      fromJson(entry("ruter", R"("kind": "tensor", "dtype": "float32")"), s, error));
  EXPECT_NE(
      error.find("'kind' must be router, residency, balance or prefetch, got \"ruter\""),
      std::string::npos)
      << error;
  EXPECT_FALSE(
      fromJson(entry("router", R"("kind": "vector", "dtype": "float32")"), s, error));
  EXPECT_NE(error.find("params[0]: 'kind' must be tensor, set"), std::string::npos)
      << error;
  EXPECT_FALSE(
      fromJson(entry("router", R"("kind": "tensor", "dtype": "float64")"), s, error));
  EXPECT_NE(error.find("params[0]: 'dtype' must be float32, int32"), std::string::npos)
      << error;
  EXPECT_FALSE(
      fromJson(entry("router", R"("kind": "tensor", "dtype": "int32", "values": "tokens")"),
               s, error));
  EXPECT_NE(error.find("'values' must be"), std::string::npos) << error;
  for (ParamKind kind : {ParamKind::Tensor, ParamKind::Set, ParamKind::Scalar,
                         ParamKind::PlacementReplicas, ParamKind::PlacementLog2Phy})
    EXPECT_EQ(parseParamKind(spelling(kind)), kind);
  for (EntryKind kind :
       {EntryKind::Router, EntryKind::Residency, EntryKind::Balance, EntryKind::Prefetch})
    EXPECT_EQ(parseEntryKind(spelling(kind)), kind);
}

TEST(Param, SizesFollowTheRuleAndRefuseOverflow) {
  Param aligned = param("sorted", true, ParamKind::Tensor, DType::I32, {-1}, {8, 8064, 1});
  EXPECT_EQ(aligned.shapeFor(5)->at(0), 8 * 5 + 8064);
  Param blocks = param("blocks", true, ParamKind::Tensor, DType::I32, {-1}, {8, 8064, 64});
  EXPECT_EQ(blocks.shapeFor(5)->at(0), (8 * 5 + 8064 + 63) / 64);
  Param rows = param("ids", true, ParamKind::Tensor, DType::I32, {-1, 8});
  EXPECT_EQ(rows.elementsFor(3), 24);
  EXPECT_FALSE(rows.shapeFor(std::numeric_limits<int64_t>::max() / 4).has_value());
  EXPECT_FALSE(rows.shapeFor(-1).has_value());
}

TEST(CallBuffers, BindsByNameAndLaysOutOutputs) {
  CallBuffers call(router());
  std::string error;
  ASSERT_TRUE(call.bind("logits", f32({3, 4}, 0.5f), "logits", error)) << error;
  ASSERT_TRUE(
      call.bind("placement", i32({4, 2}, {0, 4, 1, -1, 2, -1, 3, -1}), "placement", error))
      << error;
  ASSERT_TRUE(call.bindScalar("phase", 1, error)) << error;
  ASSERT_TRUE(call.finish(error)) << error;
  EXPECT_EQ(call.tokens(), 3);
  ASSERT_EQ(call.buffers().size(), 7u);
  // The placement became replica counts and a -1 padded table.
  const int32_t *counts = static_cast<const int32_t *>(call.buffers()[1]);
  EXPECT_EQ(counts[0], 2);
  EXPECT_EQ(counts[1], 1);
  EXPECT_EQ(call.scalars()[3], 1);
  EXPECT_EQ(call.output(4).shape, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(call.output(6).shape, (std::vector<int64_t>{2 * 3 + 12}));
}

TEST(CallBuffers, EveryBadInputNamesTheArgument) {
  std::string error;
  {
    CallBuffers call(router());
    EXPECT_FALSE(call.bind("logit", f32({3, 4}, 0), "x", error));
    EXPECT_NE(error.find("unknown argument 'logit' for @toy (its arguments: logits, "
                         "placement, phase)"),
              std::string::npos)
        << error;
  }
  {
    CallBuffers call(router());
    EXPECT_FALSE(call.bind("logits", f32({3, 5}, 0), "argument 'logits'", error));
    EXPECT_NE(error.find("argument 'logits': expected float32 [?, 4], got shape (3, 5)"),
              std::string::npos)
        << error;
  }
  {
    CallBuffers call(router());
    ASSERT_TRUE(call.bind("logits", f32({3, 4}, 0), "logits", error));
    EXPECT_FALSE(call.bind("logits", f32({3, 4}, 0), "logits", error));
    EXPECT_NE(error.find("given twice"), std::string::npos) << error;
  }
  {
    CallBuffers call(router());
    EXPECT_FALSE(call.bindScalar("phase", 3, error));
    EXPECT_NE(error.find("argument 'phase': phase 3 is not one of 0 (prefill), 1 (decode), "
                         "2 (mixed)"),
              std::string::npos)
        << error;
    EXPECT_FALSE(call.bindScalar("phase", int64_t(1) << 40, error));
    EXPECT_NE(error.find("does not fit in int32"), std::string::npos) << error;
  }
  {
    CallBuffers call(router());
    EXPECT_FALSE(call.bind("placement", i32({4, 2}, {0, 1, 1, -1, 2, -1, 3, -1}),
                           "argument 'placement'", error));
    EXPECT_NE(error.find("slot 1 holds both expert 0 and expert 1"), std::string::npos)
        << error;
  }
  {
    CallBuffers call(router());
    ASSERT_TRUE(call.bind("logits", f32({3, 4}, 0), "logits", error));
    EXPECT_FALSE(call.finish(error));
    EXPECT_NE(error.find("missing required argument 'placement'"), std::string::npos)
        << error;
  }
}

TEST(CallBuffers, RuleInputsMustBeFinite) {
  Signature rule;
  rule.entry = "plan";
  rule.kind = EntryKind::Balance;
  rule.params = {param("loads", false, ParamKind::Tensor, DType::F32, {4}),
                 param("plan", true, ParamKind::Tensor, DType::I32, {4})};
  for (float bad : {std::nanf(""), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
    CallBuffers call(rule);
    std::vector<float> v = {1, 2, bad, 4};
    std::string error;
    EXPECT_FALSE(
        call.bind("loads", npy::makeF32({4}, v.data()), "argument 'loads'", error));
    EXPECT_NE(error.find("argument 'loads': holds"), std::string::npos) << error;
    EXPECT_NE(error.find("at flat index 2; a rule's inputs must be finite"),
              std::string::npos)
        << error;
  }
}

TEST(CallBuffers, ExpertIdsMustBeExperts) {
  Signature rule;
  rule.entry = "plan";
  rule.kind = EntryKind::Balance;
  Param ids = param("ids", false, ParamKind::Tensor, DType::I32, {-1, 2});
  ids.values = ValueSet::ExpertIds;
  ids.idBound = 8;
  rule.params = {ids, param("plan", true, ParamKind::Tensor, DType::I32, {8})};
  std::string error;
  {
    CallBuffers call(rule);
    EXPECT_TRUE(call.bind("ids", i32({2, 2}, {0, -1, 7, 3}), "argument 'ids'", error))
        << error;
  }
  CallBuffers call(rule);
  EXPECT_FALSE(call.bind("ids", i32({2, 2}, {0, 1, 8, 3}), "argument 'ids'", error));
  EXPECT_NE(error.find("argument 'ids': expert id 8 at flat index 2 is outside [-1, 8)"),
            std::string::npos)
      << error;
}

// Caller memory (a NumPy array, a DLPack tensor): bound without a copy when its dtype is
// the entry's, converted otherwise; results written straight into caller memory.
TEST(CallBuffers, ViewsBindWithoutCopiesAndOutputsGoToCallerMemory) {
  std::vector<float> logits(3 * 4, 0.25f);
  std::vector<int32_t> ids(3 * 2, -7);
  std::string error;
  CallBuffers call(router());
  TensorView in{logits.data(), npy::DType::F32, {3, 4}, false};
  ASSERT_TRUE(call.bindView("logits", in, "argument 'logits'", error)) << error;
  ASSERT_TRUE(call.bind("placement", i32({4}, {0, 1, 2, 3}), "placement", error)) << error;
  ASSERT_TRUE(call.bindScalar("phase", 0, error)) << error;
  TensorView out{ids.data(), npy::DType::I32, {3, 2}, false};
  ASSERT_TRUE(call.bindOutput("topk_ids", out, error)) << error;
  ASSERT_TRUE(call.finish(error)) << error;
  EXPECT_EQ(call.buffers()[0], static_cast<void *>(logits.data())); // no copy
  EXPECT_EQ(call.buffers()[4], static_cast<void *>(ids.data()));
  EXPECT_NE(call.buffers()[5], nullptr);  // results not asked for: the call's scratch
  EXPECT_EQ(call.output(4).i32()[0], -7); // output() reads the caller's memory
}

TEST(CallBuffers, ViewsOfOtherDtypesAreConvertedAndChecked) {
  std::string error;
  // bfloat16 logits: widened into the call's storage (1.0 = 0x3F80).
  std::vector<uint16_t> bf16(2 * 4, 0x3F80);
  CallBuffers call(router());
  TensorView in{bf16.data(), npy::DType::BF16, {2, 4}, false};
  ASSERT_TRUE(call.bindView("logits", in, "argument 'logits'", error)) << error;
  ASSERT_TRUE(call.bind("placement", i32({4}, {0, 1, 2, 3}), "placement", error)) << error;
  ASSERT_TRUE(call.bindScalar("phase", 0, error)) << error;
  ASSERT_TRUE(call.finish(error)) << error;
  EXPECT_NE(call.buffers()[0], static_cast<void *>(bf16.data()));
  EXPECT_EQ(static_cast<const float *>(call.buffers()[0])[5], 1.0f);

  // Device memory of another dtype cannot be converted on the host.
  CallBuffers device(router());
  TensorView onGpu{bf16.data(), npy::DType::BF16, {2, 4}, true};
  EXPECT_FALSE(device.bindView("logits", onGpu, "argument 'logits'", error));
  EXPECT_NE(error.find("device memory must already be float32 [?, 4]"), std::string::npos)
      << error;

  // Shapes, token counts and value rules are checked on views as on arrays.
  std::vector<float> wide(2 * 5, 0.f);
  CallBuffers shape(router());
  EXPECT_FALSE(shape.bindView("logits", {wide.data(), npy::DType::F32, {2, 5}, false},
                              "argument 'logits'", error));
  EXPECT_NE(error.find("expected float32 [?, 4], got shape (2, 5)"), std::string::npos)
      << error;
  Signature rule;
  rule.entry = "plan";
  rule.kind = EntryKind::Balance;
  Param ids = param("ids", false, ParamKind::Tensor, DType::I32, {-1});
  ids.values = ValueSet::ExpertIds;
  ids.idBound = 8;
  rule.params = {ids, param("loads", false, ParamKind::Tensor, DType::F32, {-1}),
                 param("plan", true, ParamKind::Tensor, DType::I32, {8})};
  std::vector<int32_t> bad = {0, 9};
  CallBuffers values(rule);
  EXPECT_FALSE(values.bindView("ids", {bad.data(), npy::DType::I32, {2}, false},
                               "argument 'ids'", error));
  EXPECT_NE(error.find("expert id 9 at flat index 1"), std::string::npos) << error;
  std::vector<float> loads = {1.f, std::numeric_limits<float>::infinity()};
  EXPECT_FALSE(values.bindView("loads", {loads.data(), npy::DType::F32, {2}, false},
                               "argument 'loads'", error));
  EXPECT_NE(error.find("holds +inf at flat index 1"), std::string::npos) << error;
}

TEST(CallBuffers, CallerOutputsMustFitTheTokenCount) {
  std::string error;
  std::vector<float> logits(3 * 4, 0.f);
  std::vector<int32_t> small(2 * 2, 0);
  std::vector<float> wrongType(3 * 2, 0.f);
  CallBuffers call(router());
  ASSERT_TRUE(call.bindView("logits", {logits.data(), npy::DType::F32, {3, 4}, false},
                            "argument 'logits'", error));
  ASSERT_TRUE(call.bind("placement", i32({4}, {0, 1, 2, 3}), "placement", error)) << error;
  ASSERT_TRUE(call.bindScalar("phase", 0, error)) << error;
  EXPECT_FALSE(
      call.bindOutput("topk_idz", {small.data(), npy::DType::I32, {2, 2}, false}, error));
  EXPECT_NE(error.find("unknown result 'topk_idz' of @toy"), std::string::npos) << error;
  EXPECT_FALSE(call.bindOutput("topk_ids",
                               {wrongType.data(), npy::DType::F32, {3, 2}, false}, error));
  EXPECT_NE(error.find("expected int32 [?, 2] memory, got float32"), std::string::npos)
      << error;
  ASSERT_TRUE(
      call.bindOutput("topk_ids", {small.data(), npy::DType::I32, {2, 2}, false}, error));
  EXPECT_FALSE(call.finish(error));
  EXPECT_NE(
      error.find("result 'topk_ids': memory of shape (2, 2) given, 3 tokens need (3, 2)"),
      std::string::npos)
      << error;
}

} // namespace

/// A signature with two run-time knobs, as moe-compile writes them.
static Signature withKnobs() {
  Signature s = router();
  Knob budget{"budget", DType::I64, 24, 0, {}};
  KnobRule nonNegative;
  nonNegative.range.lo = 0;
  nonNegative.text = "budget must be in [0, inf]";
  nonNegative.op = "moe.fill at x.mlir:3:4";
  budget.rules.push_back(nonNegative);
  Knob alpha{"alpha", DType::F32, 0, 2.0, {}};
  KnobRule positive;
  positive.range.isFloat = positive.range.finite = positive.range.minOpen = true;
  positive.range.min = 0.0;
  positive.text = "alpha must be finite and > 0";
  positive.op = "moe.bins at x.mlir:5:6";
  alpha.rules.push_back(positive);
  s.knobs = {budget, alpha};
  return s;
}

TEST(Signature, KnobsRoundTripAndLayout) {
  Signature back;
  std::string error;
  ASSERT_TRUE(fromJson(toJson(withKnobs()), back, error)) << error;
  ASSERT_EQ(back.knobs.size(), 2u);
  EXPECT_EQ(back.knobs[0].intDefault, 24);
  EXPECT_EQ(back.knobs[1].floatDefault, 2.0);
  EXPECT_TRUE(back.knobs[1].rules[0].range.minOpen);
  KnobLayout layout(back.knobs); // struct { int64_t budget; float alpha; } in C
  EXPECT_EQ(layout.offsets, (std::vector<size_t>{0, 8}));
  EXPECT_EQ(layout.size, 16u);
  EXPECT_EQ(
      statusMessage(back, 2),
      "knob 'budget' breaks a rule: budget must be in [0, inf] (moe.fill at x.mlir:3:4)");
  EXPECT_EQ(statusMessage(back, 1), "num_tokens must be in [0, 2147483647]");
}

TEST(Signature, PackKnobsChecksEveryOverride) {
  Signature s = withKnobs();
  std::vector<uint8_t> bytes;
  std::string error;
  ASSERT_TRUE(packKnobs(s.knobs, {"budget=7", "alpha=0.5"}, bytes, error)) << error;
  int64_t budget;
  float alpha;
  std::memcpy(&budget, bytes.data(), 8);
  std::memcpy(&alpha, bytes.data() + 8, 4);
  EXPECT_EQ(budget, 7);
  EXPECT_EQ(alpha, 0.5f);
  EXPECT_FALSE(packKnobs(s.knobs, {"budget=-1"}, bytes, error));
  EXPECT_EQ(error,
            "knob 'budget': budget must be in [0, inf], got -1 (moe.fill at x.mlir:3:4)");
  EXPECT_FALSE(packKnobs(s.knobs, {"alpha=nan"}, bytes, error));
  EXPECT_NE(error.find("alpha must be finite"), std::string::npos) << error;
  EXPECT_FALSE(packKnobs(s.knobs, {"budget=1.5"}, bytes, error));
  EXPECT_NE(error.find("is not an int64"), std::string::npos) << error;
  EXPECT_FALSE(packKnobs(s.knobs, {"bugdet=1"}, bytes, error));
  EXPECT_EQ(error, "unknown knob 'bugdet'");
}

TEST(Signature, MalformedKnobsNameTheField) {
  Signature s;
  std::string error;
  EXPECT_FALSE(
      fromJson(R"({"entry": "x", "kind": "router", "params": [], "knobs": 3})", s, error));
  EXPECT_NE(error.find("'knobs' must be an array"), std::string::npos) << error;
  EXPECT_FALSE(fromJson(R"({"entry": "x", "kind": "router", "params": [],
      "knobs": [{"name": "k", "dtype": "int64", "default": 1.5, "rules": []}]})",
                        s, error));
  EXPECT_NE(error.find("knobs[0]"), std::string::npos) << error;
  EXPECT_FALSE(fromJson(R"({"entry": "x", "kind": "router", "params": [],
      "knobs": [{"name": "k", "dtype": "int64", "default": 1,
                 "rules": [{"text": "t", "op": "o", "lo": "zero"}]}]})",
                        s, error));
  EXPECT_NE(error.find("wrong types"), std::string::npos) << error;
}

TEST(Signature, RelationsAreLeftToTheCompiledCode) {
  // A rule relating several knobs (DynaExq's budget): the compiled code checks it at run
  // time; packKnobs cannot (it sees one value at a time) and must not reject on it.
  Signature s = withKnobs();
  KnobRule relation;
  relation.range.relation = "budget >= fixed + layers * hi_bytes";
  relation.text = relation.range.relation;
  relation.op = "moe.hi_capacity at x.mlir:7:8";
  s.knobs[0].rules.push_back(relation);
  Signature back;
  std::string error;
  ASSERT_TRUE(fromJson(toJson(s), back, error)) << error;
  EXPECT_EQ(back.knobs[0].rules[1].range.relation, "budget >= fixed + layers * hi_bytes");
  EXPECT_EQ(back.knobs[0].rules[1].range.requirement(),
            "must satisfy budget >= fixed + layers * hi_bytes");
  EXPECT_FALSE(back.knobs[0].rules[1].range.violation(int64_t(-5)).has_value());
  std::vector<uint8_t> bytes;
  EXPECT_TRUE(packKnobs(back.knobs, {"budget=3"}, bytes, error)) << error;
  EXPECT_FALSE(packKnobs(back.knobs, {"budget=-1"}, bytes, error)); // its range still holds
  EXPECT_EQ(
      statusMessage(back, 2),
      "knob 'budget' breaks a rule: budget must be in [0, inf] (moe.fill at x.mlir:3:4); "
      "budget >= fixed + layers * hi_bytes (moe.hi_capacity at x.mlir:7:8)");
  EXPECT_FALSE(fromJson(R"({"entry": "x", "kind": "router", "params": [],
      "knobs": [{"name": "k", "dtype": "int64", "default": 1,
                 "rules": [{"text": "t", "op": "o", "relation": 3}]}]})",
                        back, error));
  EXPECT_NE(error.find("wrong types"), std::string::npos) << error;
}

} // namespace binding_test
