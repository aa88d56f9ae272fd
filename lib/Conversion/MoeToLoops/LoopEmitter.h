//===- LoopEmitter.h - terse builders for the moe loop lowering -*- C++ -*-===//
//
// The moe lowering writes small loop nests (scf/arith/math/memref) for every op. This
// helper keeps those emitters short: constants, loads and stores, counted loops with
// and without carried values, conditionals, and the ranking comparison every moe op
// shares (descending score, ties toward the lower id, NaN last).
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_LIB_CONVERSION_LOOPEMITTER_H
#define SWITCHYARD_LIB_CONVERSION_LOOPEMITTER_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"

namespace switchyard::moe {

class LoopEmitter {
public:
  LoopEmitter(mlir::OpBuilder &b, mlir::Location loc) : b(b), loc(loc) {}

  mlir::OpBuilder &builder() { return b; }
  mlir::Location location() { return loc; }

  // Constants.
  mlir::Value idx(int64_t v) { return mlir::arith::ConstantIndexOp::create(b, loc, v); }
  mlir::Value i32(int64_t v) { return intConst(v, 32); }
  mlir::Value i64(int64_t v) { return intConst(v, 64); }
  mlir::Value i8(int64_t v) { return intConst(v, 8); }
  mlir::Value f32(double v) {
    return mlir::arith::ConstantOp::create(b, loc,
                                           b.getF32FloatAttr(static_cast<float>(v)));
  }
  mlir::Value negInf() { return f32(-std::numeric_limits<double>::infinity()); }

  // Conversions.
  mlir::Value toIndex(mlir::Value v) {
    return v.getType().isIndex()
               ? v
               : mlir::arith::IndexCastOp::create(b, loc, b.getIndexType(), v).getResult();
  }
  mlir::Value toI32(mlir::Value v) {
    if (v.getType().isInteger(32))
      return v;
    if (v.getType().isIndex())
      return mlir::arith::IndexCastOp::create(b, loc, b.getI32Type(), v);
    return mlir::arith::TruncIOp::create(b, loc, b.getI32Type(), v);
  }
  mlir::Value toI64(mlir::Value v) {
    if (v.getType().isInteger(64))
      return v;
    if (v.getType().isIndex())
      return mlir::arith::IndexCastOp::create(b, loc, b.getI64Type(), v);
    return mlir::arith::ExtSIOp::create(b, loc, b.getI64Type(), v);
  }
  mlir::Value toF32(mlir::Value v) {
    if (v.getType().isIndex())
      v = toI64(v);
    return mlir::arith::SIToFPOp::create(b, loc, b.getF32Type(), v);
  }

  // Memory.
  mlir::Value load(mlir::Value mem, mlir::ValueRange ivs) {
    return mlir::memref::LoadOp::create(b, loc, mem, ivs);
  }
  void store(mlir::Value value, mlir::Value mem, mlir::ValueRange ivs) {
    mlir::memref::StoreOp::create(b, loc, value, mem, ivs);
  }
  /// Fills a 1-D buffer [0, n) with `value`.
  void fill(mlir::Value mem, mlir::Value n, mlir::Value value) {
    loop(idx(0), n, [&](mlir::Value i) { store(value, mem, i); });
  }

  // Control flow.
  void loop(mlir::Value lb, mlir::Value ub, llvm::function_ref<void(mlir::Value)> body) {
    mlir::scf::ForOp::create(
        b, loc, lb, ub, idx(1), mlir::ValueRange{},
        [&](mlir::OpBuilder &nested, mlir::Location, mlir::Value iv, mlir::ValueRange) {
          mlir::OpBuilder::InsertionGuard guard(b);
          b.setInsertionPoint(nested.getInsertionBlock(), nested.getInsertionPoint());
          body(iv);
          mlir::scf::YieldOp::create(b, loc);
        });
  }
  void loop(int64_t n, llvm::function_ref<void(mlir::Value)> body) {
    loop(idx(0), idx(n), body);
  }
  /// A loop carrying values; `body` returns the next values.
  llvm::SmallVector<mlir::Value> loopCarried(
      mlir::Value lb, mlir::Value ub, mlir::ValueRange init,
      llvm::function_ref<llvm::SmallVector<mlir::Value>(mlir::Value, mlir::ValueRange)>
          body) {
    auto forOp = mlir::scf::ForOp::create(
        b, loc, lb, ub, idx(1), init,
        [&](mlir::OpBuilder &nested, mlir::Location, mlir::Value iv,
            mlir::ValueRange iter) {
          mlir::OpBuilder::InsertionGuard guard(b);
          b.setInsertionPoint(nested.getInsertionBlock(), nested.getInsertionPoint());
          llvm::SmallVector<mlir::Value> next = body(iv, iter);
          mlir::scf::YieldOp::create(b, loc, next);
        });
    return llvm::SmallVector<mlir::Value>(forOp.getResults());
  }
  /// `while (cond(values)) values = body(values)`; returns the final values.
  llvm::SmallVector<mlir::Value>
  whileLoop(mlir::ValueRange init, llvm::function_ref<mlir::Value(mlir::ValueRange)> cond,
            llvm::function_ref<llvm::SmallVector<mlir::Value>(mlir::ValueRange)> body) {
    mlir::TypeRange types = init.getTypes();
    auto whileOp = mlir::scf::WhileOp::create(
        b, loc, types, init,
        [&](mlir::OpBuilder &nested, mlir::Location, mlir::ValueRange args) {
          mlir::OpBuilder::InsertionGuard guard(b);
          b.setInsertionPoint(nested.getInsertionBlock(), nested.getInsertionPoint());
          mlir::scf::ConditionOp::create(b, loc, cond(args), args);
        },
        [&](mlir::OpBuilder &nested, mlir::Location, mlir::ValueRange args) {
          mlir::OpBuilder::InsertionGuard guard(b);
          b.setInsertionPoint(nested.getInsertionBlock(), nested.getInsertionPoint());
          mlir::scf::YieldOp::create(b, loc, body(args));
        });
    return llvm::SmallVector<mlir::Value>(whileOp.getResults());
  }
  void ifThen(mlir::Value cond, llvm::function_ref<void()> then) {
    auto ifOp = mlir::scf::IfOp::create(b, loc, cond, /*withElseRegion=*/false);
    mlir::OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
    then();
  }
  void ifThenElse(mlir::Value cond, llvm::function_ref<void()> then,
                  llvm::function_ref<void()> otherwise) {
    auto ifOp = mlir::scf::IfOp::create(b, loc, cond, /*withElseRegion=*/true);
    mlir::OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
    then();
    b.setInsertionPoint(ifOp.elseBlock()->getTerminator());
    otherwise();
  }
  // Arithmetic shorthands.
  mlir::Value select(mlir::Value c, mlir::Value t, mlir::Value f) {
    return mlir::arith::SelectOp::create(b, loc, c, t, f);
  }
  mlir::Value andI(mlir::Value a, mlir::Value c) {
    return mlir::arith::AndIOp::create(b, loc, a, c);
  }
  mlir::Value orI(mlir::Value a, mlir::Value c) {
    return mlir::arith::OrIOp::create(b, loc, a, c);
  }
  mlir::Value notI(mlir::Value a) {
    return mlir::arith::XOrIOp::create(
        b, loc, a, mlir::arith::ConstantOp::create(b, loc, b.getBoolAttr(true)));
  }
  mlir::Value addI(mlir::Value a, mlir::Value c) {
    return mlir::arith::AddIOp::create(b, loc, a, c);
  }
  mlir::Value subI(mlir::Value a, mlir::Value c) {
    return mlir::arith::SubIOp::create(b, loc, a, c);
  }
  mlir::Value mulI(mlir::Value a, mlir::Value c) {
    return mlir::arith::MulIOp::create(b, loc, a, c);
  }
  mlir::Value divUI(mlir::Value a, mlir::Value c) {
    return mlir::arith::DivUIOp::create(b, loc, a, c);
  }
  mlir::Value remUI(mlir::Value a, mlir::Value c) {
    return mlir::arith::RemUIOp::create(b, loc, a, c);
  }
  mlir::Value minUI(mlir::Value a, mlir::Value c) {
    return mlir::arith::MinUIOp::create(b, loc, a, c);
  }
  mlir::Value cmpI(mlir::arith::CmpIPredicate p, mlir::Value a, mlir::Value c) {
    return mlir::arith::CmpIOp::create(b, loc, p, a, c);
  }
  mlir::Value cmpF(mlir::arith::CmpFPredicate p, mlir::Value a, mlir::Value c) {
    return mlir::arith::CmpFOp::create(b, loc, p, a, c);
  }
  mlir::Value addF(mlir::Value a, mlir::Value c) {
    return mlir::arith::AddFOp::create(b, loc, a, c);
  }
  mlir::Value subF(mlir::Value a, mlir::Value c) {
    return mlir::arith::SubFOp::create(b, loc, a, c);
  }
  mlir::Value mulF(mlir::Value a, mlir::Value c) {
    return mlir::arith::MulFOp::create(b, loc, a, c);
  }
  mlir::Value divF(mlir::Value a, mlir::Value c) {
    return mlir::arith::DivFOp::create(b, loc, a, c);
  }
  mlir::Value exp(mlir::Value a) { return mlir::math::ExpOp::create(b, loc, a); }
  mlir::Value isNaN(mlir::Value a) { return cmpF(mlir::arith::CmpFPredicate::UNO, a, a); }
  /// True when `set[e]` (an i8 0/1 flag) is set.
  mlir::Value isSet(mlir::Value set, mlir::Value e) {
    return cmpI(mlir::arith::CmpIPredicate::ne, load(set, e), i8(0));
  }

  /// The ranking every moe op uses: `a` (at a higher id) outranks the current best `best`
  /// only when strictly greater; NaN ranks below every number. Scanning ids in ascending
  /// order with this test breaks ties toward the lower id.
  mlir::Value outranks(mlir::Value a, mlir::Value best) {
    mlir::Value aNum = notI(isNaN(a));
    mlir::Value greater = orI(isNaN(best), cmpF(mlir::arith::CmpFPredicate::OGT, a, best));
    return andI(aNum, greater);
  }

  /// The best-ranked id in [0, n) among those where `eligible(i)` holds, with its score
  /// `score(i)`; id -1 (and score 0) when none is eligible.
  std::pair<mlir::Value, mlir::Value>
  argBest(mlir::Value n, llvm::function_ref<mlir::Value(mlir::Value)> eligible,
          llvm::function_ref<mlir::Value(mlir::Value)> score) {
    auto res =
        loopCarried(idx(0), n, {i32(-1), f32(0)}, [&](mlir::Value i, mlir::ValueRange it) {
          mlir::Value v = score(i);
          mlir::Value none = cmpI(mlir::arith::CmpIPredicate::slt, it[0], i32(0));
          mlir::Value take = andI(eligible(i), orI(none, outranks(v, it[1])));
          return llvm::SmallVector<mlir::Value>{select(take, toI32(i), it[0]),
                                                select(take, v, it[1])};
        });
    return {res[0], res[1]};
  }

  /// The lowest-ranked eligible id (ties: the higher id; NaN lowest of all), or -1.
  mlir::Value argWorst(mlir::Value n, llvm::function_ref<mlir::Value(mlir::Value)> eligible,
                       llvm::function_ref<mlir::Value(mlir::Value)> score) {
    auto res =
        loopCarried(idx(0), n, {i32(-1), f32(0)}, [&](mlir::Value i, mlir::ValueRange it) {
          mlir::Value v = score(i);
          mlir::Value none = cmpI(mlir::arith::CmpIPredicate::slt, it[0], i32(0));
          mlir::Value take = andI(eligible(i), orI(none, notI(outranks(v, it[1]))));
          return llvm::SmallVector<mlir::Value>{select(take, toI32(i), it[0]),
                                                select(take, v, it[1])};
        });
    return res[0];
  }

private:
  mlir::Value intConst(int64_t v, unsigned width) {
    return mlir::arith::ConstantOp::create(b, loc,
                                           b.getIntegerAttr(b.getIntegerType(width), v));
  }
  mlir::OpBuilder &b;
  mlir::Location loc;
};

} // namespace switchyard::moe

#endif
