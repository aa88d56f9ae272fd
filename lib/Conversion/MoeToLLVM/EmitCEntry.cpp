//===- EmitCEntry.cpp - flat C entry points for lowered routers -----------===//
//
// After the LLVM lowering a router function takes every memref as an expanded
// descriptor (allocated ptr, aligned ptr, offset, sizes..., strides...). Engines want
// `int32_t name(int64_t num_tokens, const float *logits, ..., int32_t *topk_ids, ...)`;
// this pass writes that function from the `moe.abi` description: each buffer's sizes
// come from the token count and its size rule ceil((a*T + b) / d), strides are row-major.
//
//===----------------------------------------------------------------------===//
#include "switchyard/Conversion/MoeToLLVM/MoeToLLVM.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Builders.h"

namespace switchyard::moe {
#define GEN_PASS_DEF_MOEEMITCENTRY
#include "switchyard/Conversion/Passes.h.inc"
} // namespace switchyard::moe

using namespace mlir;

namespace {

LogicalResult emitEntry(LLVM::LLVMFuncOp impl, ArrayAttr abi) {
  MLIRContext *ctx = impl.getContext();
  Location loc = impl.getLoc();
  std::string name = impl.getName().str();
  impl.setName(name + "__impl");
  impl.setLinkage(LLVM::Linkage::Private);

  OpBuilder b(impl);
  Type i64 = b.getI64Type(), i32 = b.getI32Type();
  auto ptr = LLVM::LLVMPointerType::get(ctx);
  SmallVector<Type> params{i64};
  for (Attribute a : abi.getValue().drop_front()) {
    Type type = cast<TypeAttr>(cast<DictionaryAttr>(a).get("type")).getValue();
    params.push_back(isa<MemRefType>(type) ? Type(ptr) : type);
  }
  auto entry = LLVM::LLVMFuncOp::create(b, loc, name,
                                        LLVM::LLVMFunctionType::get(i32, params));
  Block *block = entry.addEntryBlock(b);
  b.setInsertionPointToStart(block);
  Value tokens = block->getArgument(0);
  auto cst = [&](int64_t v) { return LLVM::ConstantOp::create(b, loc, i64, v).getResult(); };

  SmallVector<Value> args{tokens};
  for (auto [i, a] : llvm::enumerate(abi.getValue().drop_front())) {
    auto dict = cast<DictionaryAttr>(a);
    Value arg = block->getArgument(i + 1);
    auto memref = dyn_cast<MemRefType>(cast<TypeAttr>(dict.get("type")).getValue());
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
      auto rule = cast<DenseI64ArrayAttr>(dict.get("size")).asArrayRef();
      Value n = LLVM::AddOp::create(b, loc, LLVM::MulOp::create(b, loc, tokens, cst(rule[0])),
                                    cst(rule[1]));
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
  if (args.size() != impl.getNumArguments())
    return impl.emitError() << "moe.abi describes " << args.size()
                            << " lowered parameters but the function has "
                            << impl.getNumArguments();
  LLVM::CallOp::create(b, loc, impl, args);
  LLVM::ReturnOp::create(b, loc, LLVM::ConstantOp::create(b, loc, i32, 0).getResult());
  entry->setAttr("moe.abi", abi);
  impl->removeAttr("moe.abi");
  return success();
}

struct MoeEmitCEntryPass : switchyard::moe::impl::MoeEmitCEntryBase<MoeEmitCEntryPass> {
  void runOnOperation() override {
    SmallVector<LLVM::LLVMFuncOp> funcs;
    getOperation().walk([&](LLVM::LLVMFuncOp f) {
      if (f->hasAttr("moe.abi"))
        funcs.push_back(f);
    });
    for (LLVM::LLVMFuncOp f : funcs)
      if (failed(emitEntry(f, cast<ArrayAttr>(f->getAttr("moe.abi")))))
        return signalPassFailure();
  }
};

} // namespace
