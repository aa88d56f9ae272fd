//===- EmitCEntry.cpp - flat C entry points for lowered routers -----------===//
//
// After the LLVM lowering a router function takes every memref as an expanded
// descriptor (allocated ptr, aligned ptr, offset, sizes..., strides...). Engines want
// `int32_t name(int64_t num_tokens, const float *logits, ..., int32_t *topk_ids, ...)`;
// this pass writes that function from the `moe.abi` description: each buffer's sizes
// come from the token count and its size rule ceil((a*T + b) / d), strides are row-major.
// Tunable knobs (moe.abi role "knob") arrive in one `const struct NAME_knobs *` (NULL:
// the defaults); the entry checks num_tokens and each knob against the rules of the ops
// that use it and returns a status (1: num_tokens, 2 + j: knob j) before computing.
//
//===----------------------------------------------------------------------===//
#include "switchyard/Conversion/MoeToLLVM/MoeToLLVM.h"
#include "switchyard/Dialect/Moe/IR/MoeDialect.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Builders.h"

namespace switchyard::moe {
#define GEN_PASS_DEF_MOEEMITCENTRY
#include "switchyard/Conversion/Passes.h.inc"
} // namespace switchyard::moe

using namespace mlir;
using namespace switchyard::moe;

namespace {

/// The run-time checks of one knob rule (`#moe.rule`): true when `v` breaks it.
/// Unordered float comparisons make NaN break every range, as the verifier does.
Value breaksRule(OpBuilder &b, Location loc, Value v, KnobRuleAttr rule) {
  auto flag = [](BoolAttr f) { return KnobRuleAttr::flag(f); };
  Type i1 = b.getI1Type();
  Value bad = LLVM::ConstantOp::create(b, loc, i1, 0);
  if (rule.getRelation()) // checked by the body, where every value is known
    return bad;
  auto orBad = [&](Value c) { bad = LLVM::OrOp::create(b, loc, bad, c); };
  if (v.getType().isInteger(64)) {
    auto cst = [&](int64_t x) {
      return LLVM::ConstantOp::create(b, loc, b.getI64Type(), x);
    };
    orBad(LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::slt, v, cst(rule.getLo())));
    if (std::optional<int64_t> hi = rule.getHi())
      orBad(LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::sgt, v, cst(*hi)));
    return bad;
  }
  Type f64 = b.getF64Type();
  Value x = LLVM::FPExtOp::create(b, loc, f64, v);
  auto cst = [&](double d) {
    return LLVM::ConstantOp::create(b, loc, f64, b.getF64FloatAttr(d)).getResult();
  };
  auto fcmp = [&](LLVM::FCmpPredicate p, Value l, Value r) {
    return LLVM::FCmpOp::create(b, loc, p, l, r).getResult();
  };
  if (flag(rule.getFinite())) // x - x is 0 exactly for finite x, NaN otherwise
    orBad(fcmp(LLVM::FCmpPredicate::une, LLVM::FSubOp::create(b, loc, x, x), cst(0)));
  if (flag(rule.getNotNan()))
    orBad(fcmp(LLVM::FCmpPredicate::uno, x, x));
  if (flag(rule.getNonzero()))
    orBad(fcmp(LLVM::FCmpPredicate::oeq, x, cst(0)));
  if (FloatAttr min = rule.getMin())
    orBad(
        fcmp(flag(rule.getMinOpen()) ? LLVM::FCmpPredicate::ule : LLVM::FCmpPredicate::ult,
             x, cst(min.getValueAsDouble())));
  if (FloatAttr max = rule.getMax())
    orBad(
        fcmp(flag(rule.getMaxOpen()) ? LLVM::FCmpPredicate::uge : LLVM::FCmpPredicate::ugt,
             x, cst(max.getValueAsDouble())));
  return bad;
}

LogicalResult emitEntry(LLVM::LLVMFuncOp impl, AbiAttr abi) {
  MLIRContext *ctx = impl.getContext();
  Location loc = impl.getLoc();
  std::string name = impl.getName().str();
  impl.setName(name + "__impl");
  impl.setLinkage(LLVM::Linkage::Private);

  OpBuilder b(impl);
  Type i64 = b.getI64Type(), i32 = b.getI32Type();
  auto ptr = LLVM::LLVMPointerType::get(ctx);
  SmallVector<Type> params{i64};
  SmallVector<AbiParamAttr> knobs;
  SmallVector<Type> knobTypes;
  for (AbiParamAttr a : abi.getParams().drop_front()) {
    Type type = a.getType();
    if (a.isKnob()) {
      knobs.push_back(a);
      knobTypes.push_back(type);
      continue;
    }
    params.push_back(isa<MemRefType>(type) ? Type(ptr) : type);
  }
  // Tunable knobs arrive together: `const struct NAME_knobs *knobs` (NULL: defaults).
  if (!knobs.empty())
    params.push_back(ptr);
  auto entry =
      LLVM::LLVMFuncOp::create(b, loc, name, LLVM::LLVMFunctionType::get(i32, params));
  Block *block = entry.addEntryBlock(b);
  b.setInsertionPointToStart(block);
  Value tokens = block->getArgument(0);
  auto cst = [&](int64_t v) {
    return LLVM::ConstantOp::create(b, loc, i64, v).getResult();
  };

  // A failed check returns its status: 1 for num_tokens, 2 + j for knob j.
  Block *fail = new Block();
  fail->addArgument(i32, loc);
  entry.getBody().push_back(fail);
  auto check = [&](Value bad, int32_t status) {
    Block *next = new Block();
    entry.getBody().push_back(next);
    Value code = LLVM::ConstantOp::create(b, loc, i32, status);
    LLVM::CondBrOp::create(b, loc, bad, fail, ValueRange{code}, next, ValueRange{});
    b.setInsertionPointToStart(next);
  };
  check(LLVM::OrOp::create(
            b, loc, LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::slt, tokens, cst(0)),
            LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::sgt, tokens, cst(INT32_MAX))),
        1);

  SmallVector<Value> knobValues;
  if (!knobs.empty()) {
    // The caller's struct, or a constant one holding the defaults.
    auto structType = LLVM::LLVMStructType::getLiteral(ctx, knobTypes);
    std::string globalName = name + "__knob_defaults";
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPoint(entry);
      auto global = LLVM::GlobalOp::create(b, loc, structType, /*isConstant=*/true,
                                           LLVM::Linkage::Private, globalName, Attribute());
      Block *init = b.createBlock(&global.getInitializerRegion());
      b.setInsertionPointToStart(init);
      Value value = LLVM::UndefOp::create(b, loc, structType);
      for (auto [j, knob] : llvm::enumerate(knobs)) {
        Value field =
            LLVM::ConstantOp::create(b, loc, knobTypes[j], knob.getDefaultValue());
        value = LLVM::InsertValueOp::create(b, loc, value, field, j);
      }
      LLVM::ReturnOp::create(b, loc, value);
    }
    Value given = block->getArgument(params.size() - 1);
    Value null = LLVM::ZeroOp::create(b, loc, ptr);
    Value isNull = LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::eq, given, null);
    Value defaults = LLVM::AddressOfOp::create(b, loc, ptr, globalName);
    Value source = LLVM::SelectOp::create(b, loc, isNull, defaults, given);
    for (auto [j, knob] : llvm::enumerate(knobs)) {
      Value field = LLVM::GEPOp::create(b, loc, ptr, structType, source,
                                        ArrayRef<LLVM::GEPArg>{0, int32_t(j)});
      Value v = LLVM::LoadOp::create(b, loc, knobTypes[j], field);
      Value bad = LLVM::ConstantOp::create(b, loc, b.getI1Type(), 0);
      for (KnobRuleAttr rule : knob.getKnobRules())
        bad = LLVM::OrOp::create(b, loc, bad, breaksRule(b, loc, v, rule));
      check(bad, 2 + j);
      knobValues.push_back(v);
    }
  }

  SmallVector<Value> args{tokens};
  unsigned argIndex = 1;
  for (AbiParamAttr a : abi.getParams().drop_front()) {
    if (a.isKnob())
      continue;
    Value arg = block->getArgument(argIndex++);
    auto memref = dyn_cast<MemRefType>(a.getType());
    if (!memref) {
      args.push_back(arg);
      continue;
    }
    SmallVector<Value> sizes;
    for (int64_t d = 0; d < memref.getRank(); ++d) {
      if (!memref.isDynamicDim(d)) {
        sizes.push_back(cst(memref.getDimSize(d)));
        continue;
      }
      ArrayRef<int64_t> rule = a.getSize().asArrayRef();
      Value n = LLVM::AddOp::create(
          b, loc, LLVM::MulOp::create(b, loc, tokens, cst(rule[0])), cst(rule[1]));
      if (rule[2] != 1)
        n = LLVM::UDivOp::create(b, loc, LLVM::AddOp::create(b, loc, n, cst(rule[2] - 1)),
                                 cst(rule[2]));
      sizes.push_back(n);
    }
    SmallVector<Value> strides(memref.getRank());
    Value stride = cst(1);
    for (int64_t d = memref.getRank() - 1; d >= 0; --d) {
      strides[d] = stride;
      stride = LLVM::MulOp::create(b, loc, stride, sizes[d]);
    }
    args.append({arg, arg, cst(0)});
    args.append(sizes.begin(), sizes.end());
    args.append(strides.begin(), strides.end());
  }
  args.append(knobValues.begin(), knobValues.end());
  if (args.size() != impl.getNumArguments())
    return impl.emitError() << "moe.abi describes " << args.size()
                            << " lowered parameters but the function has "
                            << impl.getNumArguments();
  // The body returns a status when a rule relating several values fails at run time
  // (RouterLowering::failIf), else nothing.
  auto call = LLVM::CallOp::create(b, loc, impl, args);
  Value status = call.getNumResults()
                     ? call.getResult()
                     : LLVM::ConstantOp::create(b, loc, i32, 0).getResult();
  LLVM::ReturnOp::create(b, loc, status);
  b.setInsertionPointToStart(fail);
  LLVM::ReturnOp::create(b, loc, fail->getArgument(0));
  setAbi(entry, abi);
  impl->removeAttr(MoeDialect::AbiAttrHelper::getNameStr());
  return success();
}

struct MoeEmitCEntryPass : switchyard::moe::impl::MoeEmitCEntryBase<MoeEmitCEntryPass> {
  void runOnOperation() override {
    SmallVector<LLVM::LLVMFuncOp> funcs;
    getOperation().walk([&](LLVM::LLVMFuncOp f) {
      if (getAbi(f))
        funcs.push_back(f);
    });
    for (LLVM::LLVMFuncOp f : funcs)
      if (failed(emitEntry(f, getAbi(f))))
        return signalPassFailure();
  }
};

} // namespace
