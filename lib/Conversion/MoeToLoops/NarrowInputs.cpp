//===- NarrowInputs.cpp - the moe-narrow-inputs pass ----------------------===//
//
// A float32 tensor input of a lowered router read as bf16 / f16 in place: the argument
// memref takes the narrow element type and every load of it widens at the load
// (memref.load + arith.extf), so the caller's half-precision logits need no f32 copy.
// Only loads, dims and views (subview, cast, ...) of the input may use it; a whole-buffer
// use (memref.copy into an output) cannot change element type and is an error.
//
//===----------------------------------------------------------------------===//
#include "switchyard/Conversion/MoeToLoops/MoeToLoops.h"
#include "switchyard/Dialect/Moe/IR/MoeDialect.h"

#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

namespace switchyard::moe {
#define GEN_PASS_DEF_MOENARROWINPUTS
#include "switchyard/Conversion/Passes.h.inc"
} // namespace switchyard::moe

using namespace mlir;
using namespace switchyard::moe;

namespace {
/// The dtypes a float input may be read in: the flag's short spelling, NumPy's name.
struct InputDtype {
  llvm::StringLiteral spelling, numpyName;
};
constexpr InputDtype kInputDtypes[] = {
    {"bf16", "bfloat16"}, {"f16", "float16"}, {"f32", "float32"}};
} // namespace

std::optional<StringRef> switchyard::moe::canonicalInputDtype(StringRef dtype) {
  for (const InputDtype &d : kInputDtypes)
    if (dtype == d.spelling || dtype == d.numpyName)
      return StringRef(d.spelling);
  return std::nullopt;
}

FloatType switchyard::moe::parseInputDtype(MLIRContext *context, StringRef dtype) {
  Builder b(context);
  std::optional<StringRef> canonical = canonicalInputDtype(dtype);
  if (!canonical)
    return nullptr;
  if (*canonical == "bf16")
    return b.getBF16Type();
  return *canonical == "f16" ? FloatType(b.getF16Type()) : FloatType(b.getF32Type());
}

namespace {

/// The view-like ops whose result aliases their memref operand element for element
/// (same element type): their result is retyped along with the input.
bool isElementView(Operation *op, Value source) {
  auto view = dyn_cast<ViewLikeOpInterface>(op);
  return view && view.getViewSource() == source && op->getNumResults() == 1 &&
         isa<MemRefType>(op->getResult(0).getType()) &&
         cast<MemRefType>(op->getResult(0).getType()).getElementType() ==
             cast<MemRefType>(source.getType()).getElementType();
}

/// Checks every use of `value` (the input or a view of it); the first other use is
/// reported.
LogicalResult checkUses(Value value, StringRef name, Type narrow) {
  for (OpOperand &use : value.getUses()) {
    Operation *user = use.getOwner();
    if (auto load = dyn_cast<memref::LoadOp>(user); load && load.getMemref() == value)
      continue;
    if (isa<memref::DimOp>(user))
      continue;
    if (isElementView(user, value)) {
      if (failed(checkUses(user->getResult(0), name, narrow)))
        return failure();
      continue;
    }
    return user->emitError() << "input '" << name << "' cannot be read as " << narrow
                             << " in place: '" << user->getName()
                             << "' uses the whole buffer (only element loads can widen)";
  }
  return success();
}

void retype(Value value, Type narrow) {
  auto type = cast<MemRefType>(value.getType());
  value.setType(MemRefType::Builder(type).setElementType(narrow));
  for (Operation *user : llvm::make_early_inc_range(value.getUsers())) {
    if (auto load = dyn_cast<memref::LoadOp>(user); load && load.getMemref() == value) {
      Value wide = load.getResult();
      Type f32 = wide.getType();
      wide.setType(narrow);
      OpBuilder b(load->getContext());
      b.setInsertionPointAfter(load);
      auto ext = arith::ExtFOp::create(b, load.getLoc(), f32, wide);
      wide.replaceAllUsesExcept(ext.getResult(), ext);
    } else if (isElementView(user, value)) {
      retype(user->getResult(0), narrow);
    }
  }
}

struct MoeNarrowInputsPass
    : switchyard::moe::impl::MoeNarrowInputsBase<MoeNarrowInputsPass> {
  using MoeNarrowInputsBase::MoeNarrowInputsBase;

  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    llvm::StringMap<FloatType> wanted;
    for (const std::string &spec : inputs) {
      auto [name, dtype] = StringRef(spec).split('=');
      FloatType type = switchyard::moe::parseInputDtype(ctx, dtype.trim());
      if (name.trim().empty() || !type) {
        getOperation().emitError()
            << "moe-narrow-inputs: '" << spec << "' is not NAME=bf16|f16|f32";
        return signalPassFailure();
      }
      wanted[name.trim()] = type;
    }
    if (wanted.empty())
      return;
    llvm::StringSet<> found;
    for (auto fn : getOperation().getOps<func::FuncOp>()) {
      AbiAttr abi = getAbi(fn);
      if (!abi || fn.isExternal())
        continue;
      SmallVector<AbiParamAttr> entries(abi.getParams());
      // The ABI lists the function's parameters in order (knobs included).
      for (auto [i, param] : llvm::enumerate(entries)) {
        StringRef name = param.getName().getValue();
        if (param.getRole() != AbiRole::in || !wanted.count(name))
          continue;
        FloatType narrow = wanted.lookup(name);
        found.insert(name);
        BlockArgument arg = fn.getArgument(i);
        auto memref = dyn_cast<MemRefType>(arg.getType());
        if (param.getKind() != AbiKind::tensor || !memref ||
            !memref.getElementType().isF32()) {
          fn.emitError() << "input '" << name << "' of @" << fn.getSymName()
                         << " is not a float32 tensor (its type: " << arg.getType()
                         << "); only float tensor inputs take another float type";
          return signalPassFailure();
        }
        if (narrow.isF32())
          continue;
        if (failed(checkUses(arg, name, narrow)))
          return signalPassFailure();
        retype(arg, narrow);
        entries[i] = AbiParamAttr::get(ctx, param.getName(), param.getRole(),
                                       param.getKind(), arg.getType(), param.getSize(),
                                       param.getValues(), param.getIdBound(),
                                       param.getDefaultValue(), param.getRules());
      }
      setAbi(fn, AbiAttr::get(ctx, entries));
      fn.setFunctionType(FunctionType::get(ctx, fn.getBody().getArgumentTypes(),
                                           fn.getFunctionType().getResults()));
    }
    for (const auto &entry : wanted)
      if (!found.contains(entry.getKey())) {
        getOperation().emitError()
            << "moe-narrow-inputs: no router takes an input '" << entry.getKey() << "'";
        return signalPassFailure();
      }
  }
};

} // namespace
