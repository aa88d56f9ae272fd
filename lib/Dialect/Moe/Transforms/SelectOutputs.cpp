//===- SelectOutputs.cpp - moe-select-outputs: pay only for what you use --===//
//
// Drops the results a caller does not ask for from every policy, then the ops that fed
// only them (no use, no side effect), so that an engine needing topk_ids and
// topk_weights gets a route-only kernel. Knobs stay: the knob struct is the same
// whichever results are selected.
//
//===----------------------------------------------------------------------===//
#include "switchyard/Dialect/Moe/IR/MoeOps.h"
#include "switchyard/Dialect/Moe/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/StringSet.h"

namespace switchyard::moe {
#define GEN_PASS_DEF_MOESELECTOUTPUTS
#include "switchyard/Dialect/Moe/Transforms/Passes.h.inc"
} // namespace switchyard::moe

using namespace mlir;
using namespace switchyard::moe;

/// Erases the ops of `block` (and nested blocks) that nothing uses and that have no
/// side effect, until none is left; knobs are kept.
static void eraseDeadOps(Block &block) {
  for (bool changed = true; changed;) {
    changed = false;
    SmallVector<Operation *> dead;
    block.walk<WalkOrder::PostOrder>([&](Operation *op) {
      if (!isa<KnobOp>(op) && op->getBlock() && wouldOpBeTriviallyDead(op))
        dead.push_back(op);
    });
    for (Operation *op : llvm::reverse(dead))
      if (op->use_empty()) {
        op->erase();
        changed = true;
      }
  }
}

LogicalResult switchyard::moe::selectOutputs(ModuleOp module, ArrayRef<std::string> names,
                                             StringRef entry) {
  if (names.empty())
    return success();
  llvm::StringSet<> wanted, found;
  for (const std::string &n : names)
    wanted.insert(StringRef(n).trim());
  for (PolicyOpInterface policy : getPolicyOps(module)) {
    if (!entry.empty() && policy.getSymName() != entry)
      continue;
    ArrayAttr resultNames = policy.getResultNames();
    std::string known;
    SmallVector<unsigned> keep;
    for (auto [i, n] : llvm::enumerate(resultNames)) {
      StringRef name = cast<StringAttr>(n).getValue();
      known += (known.empty() ? "" : ", ") + name.str();
      if (wanted.contains(name)) {
        keep.push_back(unsigned(i));
        found.insert(name);
      }
    }
    if (keep.empty())
      return policy.emitError() << "none of the outputs asked for ("
                                << llvm::join(names, ", ") << ") is a result of @"
                                << policy.getSymName() << " (its results: " << known << ")";
    if (keep.size() == resultNames.size())
      continue;
    // The yield, the signature and the names, in the original order.
    Block &body = policy.getBodyBlock();
    Operation *yield = body.getTerminator();
    SmallVector<Value> operands;
    SmallVector<Type> types;
    SmallVector<Attribute> kept, keptAttrs;
    auto type = cast<FunctionType>(cast<FunctionOpInterface>(*policy).getFunctionType());
    ArrayAttr resAttrs = policy->getAttrOfType<ArrayAttr>("res_attrs");
    for (unsigned i : keep) {
      operands.push_back(yield->getOperand(i));
      types.push_back(type.getResult(i));
      kept.push_back(resultNames[i]);
      if (resAttrs)
        keptAttrs.push_back(resAttrs[i]);
    }
    yield->setOperands(operands);
    Builder b(module.getContext());
    policy->setAttr("function_type", TypeAttr::get(FunctionType::get(
                                         b.getContext(), type.getInputs(), types)));
    policy->setAttr("result_names", b.getArrayAttr(kept));
    if (resAttrs)
      policy->setAttr("res_attrs", b.getArrayAttr(keptAttrs));
    eraseDeadOps(body);
  }
  for (const std::string &n : names)
    if (!found.contains(StringRef(n).trim()))
      return emitError(UnknownLoc::get(module.getContext()))
             << "output '" << n << "' is not a result of any policy in the module";
  return success();
}

namespace {
struct MoeSelectOutputsPass
    : switchyard::moe::impl::MoeSelectOutputsBase<MoeSelectOutputsPass> {
  using MoeSelectOutputsBase::MoeSelectOutputsBase;
  void runOnOperation() override {
    if (failed(selectOutputs(getOperation(), names)))
      signalPassFailure();
  }
};
} // namespace
