//===- KnobBlock.h - a kernel's knobs and scalars read from device memory -*- C++ -*-===//
//
// A kernel parameter is frozen when a CUDA graph captures the launch, so knobs passed
// by value would keep their capture-time values at every replay. Every GPU kernel
// therefore takes the policy's knob struct (NAME_knobs, the C entry's layout) in
// DEVICE memory, as one i8 buffer in place of the knob scalars: the kernel reads each
// field at entry, and an empty buffer (the launcher's NULL) means the defaults. Whoever
// writes the struct between replays changes the knobs of the next replay.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_CONVERSION_MOETOGPU_KNOBBLOCK_H
#define SWITCHYARD_CONVERSION_MOETOGPU_KNOBBLOCK_H

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Builders.h"
#include "switchyard/Dialect/Moe/IR/MoeDialect.h"

namespace switchyard::moe {

/// Replaces the knob parameters of `kernel` (the moe.abi's knobs, the parameters just
/// before the workspace) with one `memref<?xi8>` holding struct NAME_knobs, read at the
/// kernel's entry; its size is 0 for the defaults. No-op without knobs.
void readKnobsFromDeviceStruct(mlir::gpu::GPUFuncOp kernel);

/// Replaces each scalar input parameter of `kernel` (the moe.abi's role `in`, kind
/// `scalar`: LYNX's phase) with a `memref<1xT>` holding the value in device memory, read
/// at the kernel's entry: like the knobs, a value a CUDA graph's replay takes from
/// memory the runner writes, not from the captured parameters.
void readScalarInputsFromDevice(mlir::gpu::GPUFuncOp kernel);

/// Whether knob buffer `block` holds any struct (an empty buffer, the launcher's NULL:
/// the defaults).
mlir::Value knobsGiven(mlir::OpBuilder &b, mlir::Location loc, mlir::Value block);
/// Field `type` of a knob struct in `block` (the i8 buffer of knob structs) at byte
/// `offset` when `given` (knobsGiven), else `defaultValue`.
mlir::Value readKnobField(mlir::OpBuilder &b, mlir::Location loc, mlir::Value block,
                          mlir::Value given, mlir::Value offset, mlir::Type type,
                          mlir::TypedAttr defaultValue);

/// The discardable attribute of a router function (and its kernel) whose knob buffer
/// holds one struct per knob group (KnobGroups.h): its knobs are read per group, not
/// at the kernel's entry.
constexpr llvm::StringLiteral kKnobGroupsAttr =
    MoeDialect::KnobGroupsAttrHelper::getNameStr();

/// Byte offsets of the knob struct's fields (C layout: each field aligned to its size)
/// and the struct's size, for the knob types in order.
llvm::SmallVector<int64_t> knobStructOffsets(mlir::TypeRange types, int64_t &size);

} // namespace switchyard::moe

#endif
