//===- Knobs.cpp - moe-set-knobs and moe-freeze-knobs ---------------------===//
#include "switchyard/Dialect/Moe/IR/MoeOps.h"
#include "switchyard/Dialect/Moe/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

namespace switchyard::moe {
#define GEN_PASS_DEF_MOESETKNOBS
#define GEN_PASS_DEF_MOEFREEZEKNOBS
#include "switchyard/Dialect/Moe/Transforms/Passes.h.inc"
} // namespace switchyard::moe

using namespace mlir;
using namespace switchyard::moe;

/// Parses `text` as a value of the knob's type.
static FailureOr<TypedAttr> parseKnobValue(KnobOp knob, StringRef text) {
  Type type = knob.getType();
  Builder b(knob.getContext());
  if (type.isInteger(64)) {
    int64_t v;
    if (text.trim().getAsInteger(10, v))
      return failure();
    return TypedAttr(b.getI64IntegerAttr(v));
  }
  double v;
  if (text.trim().getAsDouble(v))
    return failure();
  return TypedAttr(b.getF32FloatAttr(static_cast<float>(v)));
}

LogicalResult switchyard::moe::setKnobs(ModuleOp module, ArrayRef<std::string> values) {
  // Problems with the overrides themselves have no place in the policy: report them
  // without a location (and without printing the module).
  auto cliError = [&]() { return emitError(UnknownLoc::get(module.getContext())); };
  llvm::StringMap<StringRef> wanted;
  for (const std::string &entry : values) {
    auto [name, value] = StringRef(entry).split('=');
    if (!StringRef(entry).contains('=') || name.trim().empty() || value.trim().empty())
      return cliError() << "knob override '" << entry << "' is not of the form name=value";
    if (!wanted.try_emplace(name.trim(), value).second)
      return cliError() << "knob '" << name.trim() << "' is set twice";
  }

  llvm::StringMap<bool> used;
  WalkResult walk = module.walk([&](KnobOp knob) {
    auto it = wanted.find(knob.getName());
    if (it == wanted.end())
      return WalkResult::advance();
    FailureOr<TypedAttr> attr = parseKnobValue(knob, it->second);
    if (failed(attr)) {
      knob.emitError() << "knob '" << knob.getName() << "' is " << knob.getType()
                       << " but the override '" << it->second << "' is not";
      return WalkResult::interrupt();
    }
    knob.setValueAttr(*attr);
    used[knob.getName()] = true;
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return failure();

  for (auto &entry : wanted)
    if (!used.count(entry.getKey())) {
      std::string known;
      llvm::StringSet<> listed; // a name several entries of the file share, listed once
      module.walk([&](KnobOp knob) {
        if (listed.insert(knob.getName()).second)
          known += (known.empty() ? "" : ", ") + knob.getName().str();
      });
      return cliError() << "unknown knob '" << entry.getKey()
                        << "' (the policy's knobs: " << (known.empty() ? "none" : known)
                        << ")";
    }
  return success();
}

namespace {
struct MoeSetKnobsPass : switchyard::moe::impl::MoeSetKnobsBase<MoeSetKnobsPass> {
  using MoeSetKnobsBase::MoeSetKnobsBase;
  void runOnOperation() override {
    if (failed(setKnobs(getOperation(), values)))
      signalPassFailure();
  }
};

struct MoeFreezeKnobsPass : switchyard::moe::impl::MoeFreezeKnobsBase<MoeFreezeKnobsPass> {
  using MoeFreezeKnobsBase::MoeFreezeKnobsBase;
  void runOnOperation() override {
    getOperation().walk([](KnobOp knob) {
      OpBuilder b(knob);
      auto cst = arith::ConstantOp::create(b, knob.getLoc(), knob.getValue());
      knob.replaceAllUsesWith(cst.getResult());
      knob.erase();
    });
  }
};
} // namespace
