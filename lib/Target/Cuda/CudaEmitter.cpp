//===- CudaEmitter.cpp - CUDA C++ from the mapped GPU kernel IR -----------===//
//
// Prints the kernel made by moe-map-to-gpu (scf/arith/math/memref/gpu ops on memrefs)
// as CUDA C++ with the same parameters as the PTX entry (expanded memref descriptors),
// so the generated launcher can launch either. EmitC cannot take dynamic shapes or
// these loops, hence this small emitter over the few ops the lowering produces.
//
// The source includes the fixed part, switchyard/Cuda/KernelPrelude.h (memref
// descriptors, element access, 16-bit widening; runtime/include, installed with the
// package), so compile it with -I of that include directory. It also compiles as plain
// C++ (define SWITCHYARD_CUDA_ON_HOST, switchyard/Cuda/CudaOnHost.h): CPU threads then
// run each block of the launch (switchyard_host_launch(grid, block) gives its
// geometry, the kernel's own block size required), which is how the tests check the
// emitted code on a CPU.
//
//===----------------------------------------------------------------------===//
#include "switchyard/Target/Cuda/CudaEmitter.h"
#include "switchyard/Dialect/Moe/IR/MoeOps.h"
#include "switchyard/InitAllDialects.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Tools/mlir-translate/Translation.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cstring>

using namespace mlir;

namespace switchyard::cuda {
namespace {

class Emitter {
public:
  explicit Emitter(llvm::raw_ostream &os) : os(os) {}
  LogicalResult emitKernel(gpu::GPUFuncOp kernel);

private:
  std::string name(Value v) {
    auto it = names.find(v);
    if (it != names.end())
      return it->second;
    std::string n = "v" + std::to_string(names.size());
    names[v] = n;
    return n;
  }
  std::string type(Type t);
  std::string memrefType(MemRefType t) {
    return "SyMemRef<" + type(t.getElementType()) + ", " + std::to_string(t.getRank()) +
           ">";
  }
  void indent() { os.indent(depth * 2); }
  /// The prelude's element access for a buffer in `t`'s memory space.
  static const char *access(MemRefType t) {
    auto space = dyn_cast_or_null<gpu::AddressSpaceAttr>(t.getMemorySpace());
    return space && space.getValue() == gpu::AddressSpace::Workgroup ? "syAtShared"
                                                                     : "syAt";
  }
  void declare(Value v) {
    indent();
    // A region op's result nothing live reads is still assigned by its yields.
    if (llvm::all_of(v.getUsers(), [&](Operation *user) { return dead.contains(user); }))
      os << "[[maybe_unused]] ";
    os << (isa<MemRefType>(v.getType()) ? memrefType(cast<MemRefType>(v.getType()))
                                        : type(v.getType()))
       << " " << name(v);
  }
  LogicalResult emitBlock(Block &block);
  LogicalResult emitOp(Operation &op);
  std::string constant(Attribute attr, Type t);

  /// The ops of the kernel whose values nothing live reads (markDead): not printed.
  void markDead(gpu::GPUFuncOp kernel);

  llvm::raw_ostream &os;
  llvm::DenseMap<Value, std::string> names;
  llvm::DenseSet<Operation *> dead;
  int depth = 1;
};

std::string Emitter::type(Type t) {
  if (t.isIndex() || t.isInteger(64))
    return "int64_t";
  if (t.isInteger(32))
    return "int32_t";
  if (t.isInteger(8))
    return "int8_t";
  if (t.isInteger(1))
    return "bool";
  if (t.isF32())
    return "float";
  if (t.isBF16() || t.isF16())
    return "uint16_t"; // the 16-bit pattern; arith.extf widens it (syBf16ToFloat)
  if (t.isF64())
    return "double";
  return "/*unsupported*/ void";
}

std::string Emitter::constant(Attribute attr, Type t) {
  if (auto f = dyn_cast<FloatAttr>(attr); f && t.isF64()) {
    // A hexadecimal literal is exact (f64 appears in capacity arithmetic, finite).
    char buf[48];
    snprintf(buf, sizeof buf, "%a", f.getValueAsDouble());
    return buf;
  }
  if (auto f = dyn_cast<FloatAttr>(attr)) {
    uint32_t bits = static_cast<uint32_t>(f.getValue().bitcastToAPInt().getZExtValue());
    char buf[40];
    snprintf(buf, sizeof buf, "__int_as_float(0x%08x)", bits);
    return buf;
  }
  auto i = cast<IntegerAttr>(attr);
  if (t.isInteger(1))
    return i.getValue().getBoolValue() ? "true" : "false";
  return "(" + type(t) + ")(" + std::to_string(i.getValue().getSExtValue()) + "LL)";
}

static const char *cmpIOp(arith::CmpIPredicate p) {
  switch (p) {
  case arith::CmpIPredicate::eq:
    return "==";
  case arith::CmpIPredicate::ne:
    return "!=";
  case arith::CmpIPredicate::slt:
  case arith::CmpIPredicate::ult:
    return "<";
  case arith::CmpIPredicate::sle:
  case arith::CmpIPredicate::ule:
    return "<=";
  case arith::CmpIPredicate::sgt:
  case arith::CmpIPredicate::ugt:
    return ">";
  case arith::CmpIPredicate::sge:
  case arith::CmpIPredicate::uge:
    return ">=";
  }
  return "==";
}

static bool isUnsigned(arith::CmpIPredicate p) {
  return p == arith::CmpIPredicate::ult || p == arith::CmpIPredicate::ule ||
         p == arith::CmpIPredicate::ugt || p == arith::CmpIPredicate::uge;
}

LogicalResult Emitter::emitBlock(Block &block) {
  for (Operation &op : block)
    if (failed(emitOp(op)))
      return failure();
  return success();
}

void Emitter::markDead(gpu::GPUFuncOp kernel) {
  // A pure op is dead when every user is: users follow their operands in program
  // order, so one pass from the end finds whole dead chains.
  llvm::SmallVector<Operation *> ops;
  kernel.getBody().walk<WalkOrder::PreOrder>([&](Operation *op) { ops.push_back(op); });
  for (Operation *op : llvm::reverse(ops))
    if (op->getNumRegions() == 0 && op->getNumResults() > 0 && isMemoryEffectFree(op) &&
        llvm::all_of(op->getUsers(), [&](Operation *user) { return dead.contains(user); }))
      dead.insert(op);
}

LogicalResult Emitter::emitOp(Operation &op) {
  // A value nothing live reads is not printed (a constant the canonicalizer left for a
  // folded use, index arithmetic of a dead address): the source compiles without
  // unused-variable warnings.
  if (dead.contains(&op))
    return success();
  auto bin = [&](const char *sym) {
    declare(op.getResult(0));
    os << " = " << name(op.getOperand(0)) << " " << sym << " " << name(op.getOperand(1))
       << ";\n";
    return success();
  };
  auto call = [&](const char *fn) {
    declare(op.getResult(0));
    os << " = " << fn << "(";
    llvm::interleaveComma(op.getOperands(), os, [&](Value v) { os << name(v); });
    os << ");\n";
    return success();
  };
  auto castTo = [&]() {
    declare(op.getResult(0));
    os << " = (" << type(op.getResult(0).getType()) << ")" << name(op.getOperand(0))
       << ";\n";
    return success();
  };
  auto unsignedOp = [&](const char *sym) {
    declare(op.getResult(0));
    std::string u = op.getResult(0).getType().isInteger(32) ? "uint32_t" : "uint64_t";
    os << " = (" << type(op.getResult(0).getType()) << ")((" << u << ")"
       << name(op.getOperand(0)) << " " << sym << " (" << u << ")" << name(op.getOperand(1))
       << ");\n";
    return success();
  };
  return llvm::TypeSwitch<Operation *, LogicalResult>(&op)
      .Case([&](arith::ConstantOp c) {
        declare(c.getResult());
        os << " = " << constant(c.getValue(), c.getType()) << ";\n";
        return success();
      })
      .Case<arith::AddIOp, arith::AddFOp>([&](auto) { return bin("+"); })
      .Case<arith::SubIOp, arith::SubFOp>([&](auto) { return bin("-"); })
      .Case<arith::MulIOp, arith::MulFOp>([&](auto) { return bin("*"); })
      .Case<arith::DivFOp, arith::DivSIOp>([&](auto) { return bin("/"); })
      .Case<arith::RemSIOp>([&](auto) { return bin("%"); })
      .Case<arith::DivUIOp>([&](auto) { return unsignedOp("/"); })
      .Case<arith::RemUIOp>([&](auto) { return unsignedOp("%"); })
      .Case<arith::AndIOp>(
          [&](auto) { return bin(op.getResult(0).getType().isInteger(1) ? "&&" : "&"); })
      .Case<arith::OrIOp>(
          [&](auto) { return bin(op.getResult(0).getType().isInteger(1) ? "||" : "|"); })
      .Case<arith::XOrIOp>([&](auto) { return bin("^"); })
      .Case([&](arith::MinUIOp) {
        declare(op.getResult(0));
        std::string a = name(op.getOperand(0)), c = name(op.getOperand(1));
        std::string u = op.getResult(0).getType().isInteger(32) ? "uint32_t" : "uint64_t";
        os << " = ((" << u << ")" << a << " < (" << u << ")" << c << ") ? " << a << " : "
           << c << ";\n";
        return success();
      })
      .Case([&](arith::MaxUIOp) {
        declare(op.getResult(0));
        std::string a = name(op.getOperand(0)), c = name(op.getOperand(1));
        std::string u = op.getResult(0).getType().isInteger(32) ? "uint32_t" : "uint64_t";
        os << " = ((" << u << ")" << a << " > (" << u << ")" << c << ") ? " << a << " : "
           << c << ";\n";
        return success();
      })
      .Case<arith::ShLIOp, arith::ShRUIOp>([&](auto) {
        declare(op.getResult(0));
        std::string u = op.getResult(0).getType().isInteger(32) ? "uint32_t" : "uint64_t";
        os << " = (" << type(op.getResult(0).getType()) << ")((" << u << ")"
           << name(op.getOperand(0)) << (isa<arith::ShLIOp>(op) ? " << " : " >> ")
           << name(op.getOperand(1)) << ");\n";
        return success();
      })
      .Case([&](arith::BitcastOp c) {
        declare(c.getResult());
        os << " = syBitcast<" << type(c.getType()) << ">(" << name(c.getIn()) << ");\n";
        return success();
      })
      .Case([&](gpu::ShuffleOp s) -> LogicalResult {
        if (s.getMode() != gpu::ShuffleMode::XOR && s.getMode() != gpu::ShuffleMode::IDX)
          return s.emitOpError() << "has no CUDA C++ form for this mode";
        declare(s.getShuffleResult());
        os << " = "
           << (s.getMode() == gpu::ShuffleMode::XOR ? "__shfl_xor_sync" : "__shfl_sync")
           << "(0xffffffffu, " << name(s.getValue()) << ", " << name(s.getOffset()) << ", "
           << name(s.getWidth()) << ");\n";
        if (!s.getValid().use_empty()) { // every lane of a full warp is valid
          declare(s.getValid());
          os << " = true;\n";
        }
        return success();
      })
      .Case([&](NVVM::SyncWarpOp w) {
        indent();
        os << "__syncwarp((unsigned)" << name(w.getMask()) << ");\n";
        return success();
      })
      .Case([&](arith::MaximumFOp) { return call("syMaximum"); })
      .Case([&](arith::MinNumFOp) { return call("fminf"); })
      .Case([&](arith::MaxNumFOp) { return call("fmaxf"); })
      .Case([&](arith::NegFOp) {
        declare(op.getResult(0));
        os << " = -" << name(op.getOperand(0)) << ";\n";
        return success();
      })
      .Case([&](math::ExpOp) { return call("expf"); })
      .Case([&](math::FloorOp) { return call("floorf"); })
      .Case([&](math::PowFOp) { return call("powf"); })
      .Case([&](arith::CmpIOp c) {
        declare(c.getResult());
        if (isUnsigned(c.getPredicate())) {
          std::string u = c.getLhs().getType().isInteger(32) ? "uint32_t" : "uint64_t";
          os << " = (" << u << ")" << name(c.getLhs()) << " " << cmpIOp(c.getPredicate())
             << " (" << u << ")" << name(c.getRhs()) << ";\n";
        } else {
          os << " = " << name(c.getLhs()) << " " << cmpIOp(c.getPredicate()) << " "
             << name(c.getRhs()) << ";\n";
        }
        return success();
      })
      .Case([&](arith::CmpFOp c) {
        std::string a = name(c.getLhs()), d = name(c.getRhs());
        std::string ordered = "!isnan(" + a + ") && !isnan(" + d + ")";
        std::string unordered = "isnan(" + a + ") || isnan(" + d + ")";
        std::string e;
        using F = arith::CmpFPredicate;
        switch (c.getPredicate()) {
        case F::OEQ:
          e = a + " == " + d;
          break;
        case F::ONE:
          e = "(" + ordered + ") && " + a + " != " + d;
          break;
        case F::OGT:
          e = a + " > " + d;
          break;
        case F::OGE:
          e = a + " >= " + d;
          break;
        case F::OLT:
          e = a + " < " + d;
          break;
        case F::OLE:
          e = a + " <= " + d;
          break;
        case F::UNO:
          e = unordered;
          break;
        case F::ORD:
          e = ordered;
          break;
        case F::UEQ:
          e = "(" + unordered + ") || " + a + " == " + d;
          break;
        case F::UNE:
          e = a + " != " + d;
          break;
        case F::UGT:
          e = "(" + unordered + ") || " + a + " > " + d;
          break;
        case F::UGE:
          e = "(" + unordered + ") || " + a + " >= " + d;
          break;
        case F::ULT:
          e = "(" + unordered + ") || " + a + " < " + d;
          break;
        case F::ULE:
          e = "(" + unordered + ") || " + a + " <= " + d;
          break;
        case F::AlwaysTrue:
          e = "true";
          break;
        case F::AlwaysFalse:
          e = "false";
          break;
        }
        declare(c.getResult());
        os << " = " << e << ";\n";
        return success();
      })
      .Case([&](arith::SelectOp s) {
        declare(s.getResult());
        os << " = " << name(s.getCondition()) << " ? " << name(s.getTrueValue()) << " : "
           << name(s.getFalseValue()) << ";\n";
        return success();
      })
      .Case([&](arith::ExtFOp e) {
        Type from = e.getIn().getType();
        if (!from.isBF16() && !from.isF16())
          return castTo();
        declare(e.getResult());
        os << " = " << (from.isBF16() ? "syBf16ToFloat(" : "syHalfToFloat(")
           << name(e.getIn()) << ");\n";
        return success();
      })
      .Case<arith::IndexCastOp, arith::ExtSIOp, arith::TruncIOp, arith::SIToFPOp,
            arith::FPToSIOp, arith::ExtFOp, arith::TruncFOp>([&](auto) { return castTo(); })
      .Case<arith::MaxSIOp, arith::MinSIOp>([&](auto) {
        declare(op.getResult(0));
        std::string a = name(op.getOperand(0)), c = name(op.getOperand(1));
        os << " = (" << a << (isa<arith::MaxSIOp>(op) ? " > " : " < ") << c << ") ? " << a
           << " : " << c << ";\n";
        return success();
      })
      .Case<arith::ShRSIOp>([&](auto) { return bin(">>"); })
      .Case([&](arith::ExtUIOp e) {
        declare(e.getResult());
        std::string u = e.getIn().getType().isInteger(1)   ? "bool"
                        : e.getIn().getType().isInteger(8) ? "uint8_t"
                                                           : "uint32_t";
        os << " = (" << type(e.getType()) << ")(" << u << ")" << name(e.getIn()) << ";\n";
        return success();
      })
      .Case([&](memref::DimOp d) -> LogicalResult {
        std::optional<int64_t> dim = d.getConstantIndex();
        if (!dim)
          return failure();
        declare(d.getResult());
        os << " = " << name(d.getSource()) << ".sizes[" << *dim << "];\n";
        return success();
      })
      .Case([&](memref::LoadOp l) {
        declare(l.getResult());
        os << " = " << access(l.getMemRefType()) << "(" << name(l.getMemref());
        for (Value i : l.getIndices())
          os << ", " << name(i);
        os << ");\n";
        return success();
      })
      .Case([&](memref::StoreOp s) {
        indent();
        os << access(s.getMemRefType()) << "(" << name(s.getMemref());
        for (Value i : s.getIndices())
          os << ", " << name(i);
        os << ") = " << name(s.getValue()) << ";\n";
        return success();
      })
      .Case([&](memref::AtomicRMWOp a) {
        declare(a.getResult());
        os << " = atomicAdd(&syAt(" << name(a.getMemref());
        for (Value i : a.getIndices())
          os << ", " << name(i);
        os << "), " << name(a.getValue()) << ");\n";
        return a.getKind() == arith::AtomicRMWKind::addi ? success() : failure();
      })
      .Case([&](memref::ViewOp v) {
        MemRefType t = v.getType();
        declare(v.getResult());
        std::string src = name(v.getSource());
        os << " = {(" << type(t.getElementType()) << " *)(" << src << ".base + " << src
           << ".offset + " << name(v.getByteShift()) << "), 0, {";
        SmallVector<std::string> sizes;
        unsigned dyn = 0;
        for (int64_t d : t.getShape())
          sizes.push_back(ShapedType::isDynamic(d) ? name(v.getSizes()[dyn++])
                                                   : std::to_string(d));
        llvm::interleaveComma(sizes, os);
        os << "}, {";
        for (size_t d = 0; d < sizes.size(); ++d) {
          std::string stride = "1";
          for (size_t e = d + 1; e < sizes.size(); ++e)
            stride += " * " + sizes[e];
          os << (d ? ", " : "") << stride;
        }
        os << "}};\n";
        return success();
      })
      .Case([&](memref::SubViewOp v) {
        // Only the row views the lowering makes: [i, 0] [1, n] [1, 1] -> rank 1.
        if (v.getType().getRank() != 1 || v.getSource().getType().getRank() != 2)
          return failure();
        std::string src = name(v.getSource());
        OpFoldResult row = v.getMixedOffsets()[0];
        std::string rowText = isa<Value>(row) ? name(cast<Value>(row))
                                              : std::to_string(*getConstantIntValue(row));
        declare(v.getResult());
        os << " = {" << src << ".base, " << src << ".offset + " << rowText << " * " << src
           << ".strides[0], {" << v.getType().getDimSize(0) << "}, {" << src
           << ".strides[1]}};\n";
        return success();
      })
      .Case([&](scf::ForOp f) {
        for (auto [res, init] : llvm::zip(f.getResults(), f.getInitArgs())) {
          declare(res);
          os << " = " << name(init) << ";\n";
        }
        indent();
        std::string iv = name(f.getInductionVar());
        os << "for (int64_t " << iv << " = " << name(f.getLowerBound()) << "; " << iv
           << " < " << name(f.getUpperBound()) << "; " << iv << " += " << name(f.getStep())
           << ") {\n";
        ++depth;
        for (auto [arg, res] : llvm::zip(f.getRegionIterArgs(), f.getResults())) {
          declare(arg);
          os << " = " << name(res) << ";\n";
        }
        if (failed(emitBlock(*f.getBody())))
          return failure();
        auto yield = cast<scf::YieldOp>(f.getBody()->getTerminator());
        for (auto [res, v] : llvm::zip(f.getResults(), yield.getOperands())) {
          indent();
          os << name(res) << " = " << name(v) << ";\n";
        }
        --depth;
        indent();
        os << "}\n";
        return success();
      })
      .Case([&](scf::IfOp i) {
        for (Value r : i.getResults()) {
          declare(r);
          os << ";\n";
        }
        indent();
        os << "if (" << name(i.getCondition()) << ") {\n";
        auto branch = [&](Region &region) {
          ++depth;
          if (failed(emitBlock(region.front())))
            return failure();
          auto yield = cast<scf::YieldOp>(region.front().getTerminator());
          for (auto [r, v] : llvm::zip(i.getResults(), yield.getOperands())) {
            indent();
            os << name(r) << " = " << name(v) << ";\n";
          }
          --depth;
          return success();
        };
        if (failed(branch(i.getThenRegion())))
          return failure();
        indent();
        os << "}";
        if (!i.getElseRegion().empty()) {
          os << " else {\n";
          if (failed(branch(i.getElseRegion())))
            return failure();
          indent();
          os << "}";
        }
        os << "\n";
        return success();
      })
      .Case([&](scf::WhileOp w) {
        Block &before = w.getBefore().front(), &after = w.getAfter().front();
        for (auto [arg, init] : llvm::zip(before.getArguments(), w.getInits())) {
          declare(arg);
          os << " = " << name(init) << ";\n";
        }
        for (Value r : w.getResults()) {
          declare(r);
          os << ";\n";
        }
        indent();
        os << "while (true) {\n";
        ++depth;
        if (failed(emitBlock(before)))
          return failure();
        auto cond = cast<scf::ConditionOp>(before.getTerminator());
        for (auto [r, v] : llvm::zip(w.getResults(), cond.getArgs())) {
          indent();
          os << name(r) << " = " << name(v) << ";\n";
        }
        indent();
        os << "if (!" << name(cond.getCondition()) << ") break;\n";
        for (auto [arg, v] : llvm::zip(after.getArguments(), cond.getArgs())) {
          declare(arg);
          os << " = " << name(v) << ";\n";
        }
        if (failed(emitBlock(after)))
          return failure();
        auto yield = cast<scf::YieldOp>(after.getTerminator());
        for (auto [arg, v] : llvm::zip(before.getArguments(), yield.getOperands())) {
          indent();
          os << name(arg) << " = " << name(v) << ";\n";
        }
        --depth;
        indent();
        os << "}\n";
        return success();
      })
      .Case<scf::YieldOp, scf::ConditionOp, gpu::ReturnOp>([&](auto) { return success(); })
      .Case([&](gpu::ThreadIdOp t) {
        declare(t.getResult());
        os << " = (int64_t)threadIdx.x;\n";
        return success();
      })
      .Case([&](gpu::BlockDimOp t) {
        declare(t.getResult());
        os << " = (int64_t)blockDim.x;\n";
        return success();
      })
      .Case([&](gpu::BlockIdOp t) {
        declare(t.getResult());
        os << " = (int64_t)blockIdx.x;\n";
        return success();
      })
      .Case([&](gpu::GridDimOp t) {
        declare(t.getResult());
        os << " = (int64_t)gridDim.x;\n";
        return success();
      })
      .Case([&](NVVM::MembarOp fence) {
        indent();
        os << "__threadfence();\n";
        return success();
      })
      .Case([&](gpu::BarrierOp) {
        indent();
        os << "__syncthreads();\n";
        return success();
      })
      .Case([&](moe::GridBarrierOp) {
        indent();
        os << "syGridSync();\n";
        return success();
      })
      .Default([&](Operation *unknown) {
        return unknown->emitOpError() << "has no CUDA C++ form";
      });
}

/// The static shared memory a CTA may have (CUDA's limit without opting in; also the
/// bytes the CUDA-on-host emulation gives each block, CudaOnHost.h).
constexpr int64_t kSharedBytesPerBlock = 48 << 10;

LogicalResult Emitter::emitKernel(gpu::GPUFuncOp kernel) {
  std::string paramList, argList;
  std::vector<std::string> paramTypes;
  os << "__device__ static void " << kernel.getName() << "_body(";
  // The PTX entry's parameters: scalars, and per memref allocated, aligned, offset,
  // sizes, strides.
  bool first = true;
  auto param = [&](const std::string &text) {
    os << (first ? "" : ", ") << text;
    paramList += (first ? "" : ", ") + text;
    size_t split = text.find_last_of(" *") + 1;
    argList += std::string(first ? "" : ", ") + text.substr(split);
    std::string type = text.substr(0, split);
    paramTypes.push_back(type.back() == ' ' ? type.substr(0, type.size() - 1) : type);
    first = false;
  };
  // The entry block's arguments are the parameters, then the workgroup attributions.
  ArrayRef<BlockArgument> params = kernel.getBody().front().getArguments().take_front(
      kernel.getFunctionType().getNumInputs());
  for (BlockArgument arg : params) {
    auto m = dyn_cast<MemRefType>(arg.getType());
    std::string n = name(arg);
    if (!m) {
      param(type(arg.getType()) + " " + n);
      continue;
    }
    std::string elem = type(m.getElementType());
    param(elem + " *" + n + "_allocated");
    param(elem + " *" + n + "_aligned");
    param("int64_t " + n + "_offset");
    for (int64_t d = 0; d < m.getRank(); ++d)
      param("int64_t " + n + "_size" + std::to_string(d));
    for (int64_t d = 0; d < m.getRank(); ++d)
      param("int64_t " + n + "_stride" + std::to_string(d));
  }
  os << ") {\n";
  // Workgroup attributions: block-shared arrays (on the CPU, the block's own bytes of
  // the emulation's shared memory, at 16-byte aligned offsets).
  int64_t sharedOffset = 0;
  for (BlockArgument arg : kernel.getWorkgroupAttributions()) {
    auto m = cast<MemRefType>(arg.getType());
    if (!m.hasStaticShape() || m.getRank() != 1)
      return kernel.emitOpError()
             << "has a workgroup buffer the CUDA C++ emitter cannot place";
    std::string n = name(arg), elem = type(m.getElementType());
    if (!arg.use_empty()) // an unread buffer keeps its place in the layout, undeclared
      os << "#ifdef SWITCHYARD_CUDA_ON_HOST\n  " << elem << " *" << n
         << "_shared = static_cast<" << elem << " *>(syBlockShared(" << sharedOffset
         << "));\n#else\n  __shared__ " << elem << " " << n << "_shared[" << m.getDimSize(0)
         << "];\n#endif\n";
    sharedOffset += (m.getNumElements() * m.getElementTypeBitWidth() / 8 + 15) / 16 * 16;
    if (sharedOffset > kSharedBytesPerBlock)
      return kernel.emitOpError()
             << "needs " << sharedOffset << " bytes of shared memory, more than a CTA has ("
             << kSharedBytesPerBlock << ")";
    if (!arg.use_empty())
      os << "  " << memrefType(m) << " " << n << " = {" << n << "_shared, 0, {"
         << m.getDimSize(0) << "}, {1}};\n";
  }
  markDead(kernel);
  for (BlockArgument arg : params)
    if (auto m = dyn_cast<MemRefType>(arg.getType()); m && !arg.use_empty()) {
      std::string n = name(arg);
      os << "  " << memrefType(m) << " " << n << " = {" << n << "_aligned, " << n
         << "_offset, {";
      for (int64_t d = 0; d < m.getRank(); ++d)
        os << (d ? ", " : "") << n << "_size" << d;
      os << "}, {";
      for (int64_t d = 0; d < m.getRank(); ++d)
        os << (d ? ", " : "") << n << "_stride" << d;
      os << "}};\n";
    }
  if (failed(emitBlock(kernel.getBody().front())))
    return failure();
  os << "}\n\n";
  // The block size the kernel was built for (the launch metadata's block).
  int64_t knownBlock = 0;
  if (DenseI32ArrayAttr known = kernel.getKnownBlockSizeAttr())
    knownBlock = known[0];
  // A kernel with grid barriers runs its CTAs together on the CPU (a cooperative
  // launch: every CTA resident at once).
  bool cooperative = false;
  kernel.walk([&](moe::GridBarrierOp) { cooperative = true; });
  os << "SY_EXPORT __global__ void " << kernel.getName() << "(" << paramList << ") {\n"
     << "#ifdef SWITCHYARD_CUDA_ON_HOST\n"
     << "  syRunGrid(\"" << kernel.getName() << "\", " << knownBlock << ", "
     << (cooperative ? "true" : "false") << ", [&] { " << kernel.getName() << "_body("
     << argList << "); });\n"
     << "#else\n"
     << "  " << kernel.getName() << "_body(" << argList << ");\n"
     << "#endif\n}\n";
  // On the CPU, the kernel also in cudaLaunchKernel's convention (a pointer to each
  // parameter), for an emulated cudart that runs the generated launcher's launches.
  os << "#ifdef SWITCHYARD_CUDA_ON_HOST\nSY_EXPORT void " << kernel.getName()
     << "_params(void **args) {\n  " << kernel.getName() << "(";
  for (auto [i, type] : llvm::enumerate(paramTypes))
    os << (i ? ", " : "") << "*(" << type << " *)args[" << i << "]";
  os << ");\n}\n#endif\n";
  return success();
}

} // namespace

LogicalResult translateToCuda(ModuleOp mapped, llvm::raw_ostream &os) {
  os << "// Generated by moe-compile: CUDA C++ of the policy kernels. Do not edit.\n"
     << "// Compile with -I<Switchyard include directory>; -DSWITCHYARD_CUDA_ON_HOST runs\n"
     << "// it on CPU threads.\n"
     << "#include \"switchyard/Cuda/KernelPrelude.h\"\n\n";
  WalkResult result = mapped.walk([&](gpu::GPUFuncOp kernel) {
    Emitter emitter(os);
    return failed(emitter.emitKernel(kernel)) ? WalkResult::interrupt()
                                              : WalkResult::advance();
  });
  return failure(result.wasInterrupted());
}

void registerToCudaTranslation() {
  TranslateFromMLIRRegistration registration(
      "moe-to-cuda", "print the kernels of moe-map-to-gpu as CUDA C++",
      [](Operation *op, llvm::raw_ostream &os) -> LogicalResult {
        auto module = dyn_cast<ModuleOp>(op);
        if (!module)
          return op->emitError() << "expected a builtin.module";
        return translateToCuda(module, os);
      },
      [](DialectRegistry &registry) { registerAllDialects(registry); });
}

} // namespace switchyard::cuda
