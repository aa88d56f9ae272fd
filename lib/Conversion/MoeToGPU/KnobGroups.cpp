//===- KnobGroups.cpp - one launch for a batch of knob groups -------------===//
#include "KnobGroups.h"
#include "KnobBlock.h"

#include "switchyard/Dialect/Moe/IR/MoeDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;

namespace switchyard::moe {

namespace {

/// A parameter sized by the batch, one row per token (size rule T).
bool perToken(AbiParamAttr p) {
  DenseI64ArrayAttr size = p.getSize();
  return size && size.asArrayRef() == ArrayRef<int64_t>{1, 0, 1};
}

/// Copies row `from` of `source` to row `to` of `target` (rank 1 or 2, same type).
void copyRow(OpBuilder &b, Location loc, Value source, Value from, Value target, Value to) {
  auto type = cast<MemRefType>(source.getType());
  if (type.getRank() == 1) {
    Value v = memref::LoadOp::create(b, loc, source, ValueRange{from});
    memref::StoreOp::create(b, loc, v, target, ValueRange{to});
    return;
  }
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  Value width = memref::DimOp::create(b, loc, source, one);
  scf::ForOp::create(
      b, loc, zero, width, one, ValueRange{},
      [&](OpBuilder &inner, Location l, Value e, ValueRange) {
        Value v = memref::LoadOp::create(inner, l, source, ValueRange{from, e});
        memref::StoreOp::create(inner, l, v, target, ValueRange{to, e});
        scf::YieldOp::create(inner, l);
      });
}

/// The ops of `block` that must stay in front of the group loop: the temporaries (the
/// workspace holds them once, sized for the whole batch) and the pure code that sizes
/// them. Null when a temporary's size needs code with effects.
std::optional<llvm::SetVector<Operation *>> temporariesAndSizes(Block &block) {
  llvm::SetVector<Operation *> hoisted;
  SmallVector<Operation *> work;
  for (Operation &op : block.without_terminator())
    if (isa<memref::AllocOp>(op))
      work.push_back(&op);
  while (!work.empty()) {
    Operation *op = work.pop_back_val();
    if (!hoisted.insert(op))
      continue;
    for (Value operand : op->getOperands())
      if (Operation *def = operand.getDefiningOp()) {
        if (def->getBlock() != &block)
          continue;
        if (!isMemoryEffectFree(def) || def->getNumRegions())
          return std::nullopt;
        work.push_back(def);
      }
  }
  return hoisted;
}

} // namespace

LogicalResult routeKnobGroups(func::FuncOp f, int64_t groups) {
  AbiAttr abi = getAbi(f);
  if (!abi)
    return f.emitError() << "knob groups: @" << f.getName() << " is not a lowered router";
  MLIRContext *ctx = f.getContext();
  Location loc = f.getLoc();
  ArrayRef<AbiParamAttr> params = abi.getParams();
  // ABI parameter i is argument i of the lowered function.
  SmallVector<unsigned> tokenInputs, outputs, knobs;
  for (auto [i, p] : llvm::enumerate(params)) {
    if (p.isKnob()) {
      knobs.push_back(i);
    } else if (p.isOutput()) {
      if (!perToken(p))
        return f.emitError() << "knob groups route each group's tokens as a batch of their "
                                "own, so every result must be per token: @"
                             << f.getName() << "'s result '" << p.getName().getValue()
                             << "' is not (compile only topk_ids,topk_weights)";
      outputs.push_back(i);
    } else if (i > 0 && perToken(p) && isa<MemRefType>(p.getType())) {
      if (cast<MemRefType>(p.getType()).getRank() > 2)
        return f.emitError() << "knob groups: input '" << p.getName().getValue()
                             << "' has more than two dimensions";
      tokenInputs.push_back(i);
    }
  }
  if (knobs.empty())
    return f.emitError() << "knob groups: @" << f.getName()
                         << " has no knobs (nothing differs between groups)";
  if (outputs.empty())
    return f.emitError() << "knob groups: @" << f.getName() << " has no results";
  Block &entry = f.getBody().front();
  std::optional<llvm::SetVector<Operation *>> hoisted = temporariesAndSizes(entry);
  if (!hoisted)
    return f.emitError() << "knob groups: a temporary of @" << f.getName()
                         << " is sized by code with effects";
  SmallVector<Operation *> body;
  for (Operation &op : entry.without_terminator())
    if (!hoisted->contains(&op))
      body.push_back(&op);

  // The signature: knob_group after the inputs, the knob structs in place of the knobs.
  unsigned groupArg = outputs.front(), tableArg = knobs.front() + 1;
  auto i32 = IntegerType::get(ctx, 32);
  auto groupType = MemRefType::get({ShapedType::kDynamic}, i32);
  auto tableType = MemRefType::get({ShapedType::kDynamic}, IntegerType::get(ctx, 8));
  if (failed(f.insertArgument(groupArg, groupType, DictionaryAttr::get(ctx), loc)) ||
      failed(f.insertArgument(tableArg, tableType, DictionaryAttr::get(ctx), loc)))
    return failure();
  Builder attrs(ctx);
  SmallVector<AbiParamAttr> newParams(params);
  newParams.insert(newParams.begin() + groupArg,
                   AbiParamAttr::get(ctx, attrs.getStringAttr(kKnobGroupInput), AbiRole::in,
                                     AbiKind::tensor, groupType,
                                     attrs.getDenseI64ArrayAttr({1, 0, 1}), StringAttr(),
                                     std::nullopt, Attribute(), ArrayAttr()));
  setAbi(f, AbiAttr::get(ctx, newParams));
  f->setAttr(kKnobGroupsAttr, attrs.getI64IntegerAttr(groups));
  auto shifted = [&](unsigned i) { return i >= groupArg ? i + 1 : i; };
  Value tokens = entry.getArgument(0), group = entry.getArgument(groupArg);
  Value table = entry.getArgument(tableArg);
  SmallVector<Value> knobArgs;
  for (unsigned k : knobs)
    knobArgs.push_back(entry.getArgument(k + 2)); // after knob_group and the table

  // In front: the router's temporaries (in their order), the gathered copies and the
  // group's rows.
  OpBuilder b = OpBuilder::atBlockBegin(&entry);
  SmallVector<Operation *> front;
  for (Operation &op : entry.without_terminator())
    if (hoisted->contains(&op))
      front.push_back(&op);
  Operation *anchor = nullptr;
  for (Operation *op : front) {
    if (anchor)
      op->moveAfter(anchor);
    else
      op->moveBefore(&entry, entry.begin());
    anchor = op;
  }
  if (anchor)
    b.setInsertionPointAfter(anchor);
  Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
  Value c1 = arith::ConstantIndexOp::create(b, loc, 1);
  Value groupCount = arith::ConstantIndexOp::create(b, loc, groups);
  auto batchCopy = [&](Value of) {
    auto type = cast<MemRefType>(of.getType());
    return memref::AllocOp::create(b, loc,
                                   MemRefType::get(type.getShape(), type.getElementType()),
                                   ValueRange{tokens})
        .getResult();
  };
  SmallVector<std::pair<Value, Value>> inputCopies, outputCopies; // (argument, copy)
  for (unsigned i : tokenInputs)
    inputCopies.push_back({entry.getArgument(shifted(i)), Value()});
  for (unsigned i : outputs)
    outputCopies.push_back({entry.getArgument(shifted(i)), Value()});
  for (auto &[arg, copy] : inputCopies)
    copy = batchCopy(arg);
  for (auto &[arg, copy] : outputCopies)
    copy = batchCopy(arg);
  Value rows = memref::AllocOp::create(b, loc, MemRefType::get({ShapedType::kDynamic}, i32),
                                       ValueRange{tokens});

  auto loop = scf::ForOp::create(b, loc, c0, groupCount, c1);
  Value g = loop.getInductionVar();
  b.setInsertionPointToStart(loop.getBody());
  // 1. The group's rows, in token order (one thread: a scan).
  Value zero32 = arith::ConstantIntOp::create(b, loc, i32, 0);
  Value groups32 = arith::ConstantIntOp::create(b, loc, i32, groups);
  Value g32 = arith::IndexCastOp::create(b, loc, i32, g);
  auto scan = scf::ForOp::create(
      b, loc, c0, tokens, c1, ValueRange{c0},
      [&](OpBuilder &s, Location l, Value t, ValueRange count) {
        Value raw = memref::LoadOp::create(s, l, group, ValueRange{t});
        Value inRange = arith::AndIOp::create(
            s, l, arith::CmpIOp::create(s, l, arith::CmpIPredicate::sge, raw, zero32),
            arith::CmpIOp::create(s, l, arith::CmpIPredicate::slt, raw, groups32));
        Value effective = arith::SelectOp::create(s, l, inRange, raw, zero32);
        Value match = arith::CmpIOp::create(s, l, arith::CmpIPredicate::eq, effective, g32);
        scf::IfOp::create(s, l, match, [&](OpBuilder &then, Location tl) {
          Value row = arith::IndexCastOp::create(then, tl, i32, t);
          memref::StoreOp::create(then, tl, row, rows, ValueRange{count[0]});
          scf::YieldOp::create(then, tl);
        });
        Value next = arith::AddIOp::create(s, l, count[0], c1);
        scf::YieldOp::create(
            s, l, ValueRange{arith::SelectOp::create(s, l, match, next, count[0])});
      });
  Value n = scan.getResult(0);
  Value nonEmpty = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ugt, n, c0);
  auto ifNonEmpty = scf::IfOp::create(b, loc, nonEmpty, /*withElseRegion=*/false);
  b.setInsertionPointToStart(ifNonEmpty.thenBlock());
  // 2. The group's knobs: struct g of the table.
  SmallVector<Type> knobTypes;
  for (unsigned k : knobs)
    knobTypes.push_back(params[k].getType());
  int64_t structBytes = 0;
  SmallVector<int64_t> offsets = knobStructOffsets(knobTypes, structBytes);
  Value base =
      arith::MulIOp::create(b, loc, g, arith::ConstantIndexOp::create(b, loc, structBytes));
  SmallVector<Value> knobValues;
  Value given = knobsGiven(b, loc, table);
  for (auto [j, k] : llvm::enumerate(knobs)) {
    Value offset = arith::AddIOp::create(
        b, loc, base, arith::ConstantIndexOp::create(b, loc, offsets[j]));
    knobValues.push_back(readKnobField(b, loc, table, given, offset, knobTypes[j],
                                       cast<TypedAttr>(params[k].getDefaultValue())));
  }
  // 3. The router on the group's rows: its batch is the group's n tokens, its per-token
  // buffers the copies.
  Operation *terminator = ifNonEmpty.thenBlock()->getTerminator();
  for (Operation *op : body)
    op->moveBefore(terminator);
  auto inside = [&](OpOperand &use) { return ifNonEmpty->isAncestor(use.getOwner()); };
  tokens.replaceUsesWithIf(n, inside);
  for (auto [arg, copy] : llvm::concat<std::pair<Value, Value>>(inputCopies, outputCopies))
    arg.replaceUsesWithIf(copy, inside);
  for (auto [value, arg] : llvm::zip(knobValues, knobArgs))
    arg.replaceUsesWithIf(value, inside);
  // A batch dimension read from a copy is the group's.
  ifNonEmpty.walk([&](memref::DimOp dim) {
    std::optional<int64_t> index = getConstantIntValue(dim.getIndex());
    bool copy =
        llvm::any_of(llvm::concat<std::pair<Value, Value>>(inputCopies, outputCopies),
                     [&](auto &pair) { return pair.second == dim.getSource(); });
    if (copy && index == 0)
      dim.replaceAllUsesWith(n);
  });
  // 4. Gather the group's rows of every per-token input first, 5. scatter its results
  // back to its rows last.
  // One thread per row i of the group: `body` gets i and the row's token t.
  auto forEachRow = [&](function_ref<void(OpBuilder &, Location, Value, Value)> body) {
    scf::ParallelOp::create(b, loc, ValueRange{c0}, ValueRange{n}, ValueRange{c1},
                            [&](OpBuilder &p, Location l, ValueRange iv) {
                              Value t = arith::IndexCastOp::create(
                                  p, l, p.getIndexType(),
                                  memref::LoadOp::create(p, l, rows, iv));
                              body(p, l, iv[0], t);
                            });
  };
  b.setInsertionPointToStart(ifNonEmpty.thenBlock());
  if (!inputCopies.empty())
    forEachRow([&](OpBuilder &p, Location l, Value i, Value t) {
      for (auto [arg, copy] : inputCopies)
        copyRow(p, l, arg, t, copy, i);
    });
  b.setInsertionPoint(terminator);
  forEachRow([&](OpBuilder &p, Location l, Value i, Value t) {
    for (auto [arg, copy] : outputCopies)
      copyRow(p, l, copy, i, arg, t);
  });
  for (Value arg : knobArgs)
    if (!arg.use_empty())
      return f.emitError() << "knob groups: a knob of @" << f.getName()
                           << " sizes a temporary";
  llvm::BitVector erase(f.getNumArguments());
  for (unsigned j = 0; j < knobArgs.size(); ++j)
    erase.set(tableArg + 1 + j);
  return f.eraseArguments(erase);
}

} // namespace switchyard::moe
