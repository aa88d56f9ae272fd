//===- KnobBlock.cpp - a kernel's knobs read from device memory -----------===//
#include "KnobBlock.h"

#include "switchyard/Dialect/Moe/IR/MoeDialect.h"
#include "switchyard/Dialect/Moe/IR/MoeOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "llvm/ADT/BitVector.h"

using namespace mlir;

namespace switchyard::moe {

SmallVector<int64_t> knobStructOffsets(TypeRange types, int64_t &size) {
  SmallVector<int64_t> offsets;
  int64_t at = 0, align = 1;
  for (Type t : types) {
    int64_t bytes = std::max<int64_t>(1, t.getIntOrFloatBitWidth() / 8);
    at = llvm::alignTo(at, bytes);
    offsets.push_back(at);
    at += bytes;
    align = std::max(align, bytes);
  }
  size = llvm::alignTo(at, align);
  return offsets;
}

Value knobsGiven(OpBuilder &b, Location loc, Value block) {
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne,
                               memref::DimOp::create(b, loc, block, zero), zero);
}

Value readKnobField(OpBuilder &b, Location loc, Value block, Value given, Value offset,
                    Type type, TypedAttr defaultValue) {
  auto read = scf::IfOp::create(
      b, loc, given,
      [&](OpBuilder &then, Location l) {
        Value field = memref::ViewOp::create(then, l, MemRefType::get({1}, type), block,
                                             offset, ValueRange{});
        Value zero = arith::ConstantIndexOp::create(then, l, 0);
        Value v = memref::LoadOp::create(then, l, field, ValueRange{zero});
        scf::YieldOp::create(then, l, v);
      },
      [&](OpBuilder &otherwise, Location l) {
        Value d = arith::ConstantOp::create(otherwise, l, defaultValue);
        scf::YieldOp::create(otherwise, l, d);
      });
  return read.getResult(0);
}

void readKnobsFromDeviceStruct(gpu::GPUFuncOp kernel) {
  AbiAttr abi = getAbi(kernel);
  if (!abi || kernel->hasAttr(kKnobGroupsAttr)) // grouped: read per group already
    return;
  SmallVector<AbiParamAttr> knobs;
  for (AbiParamAttr p : abi.getParams())
    if (p.isKnob())
      knobs.push_back(p);
  if (knobs.empty())
    return;
  // The knobs are the parameters just before the workspace (moe-lower-to-loops puts
  // them after the outputs; moe-map-to-gpu appends the workspace).
  unsigned inputs = kernel.getFunctionType().getNumInputs();
  unsigned first = inputs - 1 - knobs.size();
  MLIRContext *ctx = kernel.getContext();
  Location loc = kernel.getLoc();
  auto bytesType = MemRefType::get({ShapedType::kDynamic}, IntegerType::get(ctx, 8));
  if (failed(kernel.insertArgument(first, bytesType, DictionaryAttr::get(ctx), loc)))
    return;
  Block &entry = kernel.getBody().front();
  Value block = entry.getArgument(first);

  SmallVector<Type> types;
  for (AbiParamAttr k : knobs)
    types.push_back(k.getType());
  int64_t structBytes = 0;
  SmallVector<int64_t> offsets = knobStructOffsets(types, structBytes);

  OpBuilder b = OpBuilder::atBlockBegin(&entry);
  Value given = knobsGiven(b, loc, block);
  llvm::BitVector erase(kernel.getFunctionType().getNumInputs());
  for (auto [j, knob] : llvm::enumerate(knobs)) {
    Value offset = arith::ConstantIndexOp::create(b, loc, offsets[j]);
    Value value = readKnobField(b, loc, block, given, offset, types[j],
                                cast<TypedAttr>(knob.getDefaultValue()));
    unsigned old = first + 1 + j; // the knob's scalar, after the inserted buffer
    entry.getArgument(old).replaceAllUsesWith(value);
    erase.set(old);
  }
  (void)kernel.eraseArguments(erase);
}

void readScalarInputsFromDevice(gpu::GPUFuncOp kernel) {
  AbiAttr abi = getAbi(kernel);
  if (!abi)
    return;
  Block &entry = kernel.getBody().front();
  OpBuilder b = OpBuilder::atBlockBegin(&entry);
  Location loc = kernel.getLoc();
  Value zero;
  // Kernel argument i is ABI parameter i up to the knobs (the last parameters).
  for (auto [i, p] : llvm::enumerate(abi.getParams())) {
    if (p.isKnob() || p.isOutput() || p.getKind() != AbiKind::scalar || i == 0)
      continue;
    Type type = p.getType();
    if (failed(kernel.insertArgument(i, MemRefType::get({1}, type),
                                     DictionaryAttr::get(kernel.getContext()), loc)))
      return;
    if (!zero)
      zero = arith::ConstantIndexOp::create(b, loc, 0);
    Value value = memref::LoadOp::create(b, loc, entry.getArgument(i), ValueRange{zero});
    entry.getArgument(i + 1).replaceAllUsesWith(value);
    (void)kernel.eraseArgument(i + 1);
  }
}

} // namespace switchyard::moe
