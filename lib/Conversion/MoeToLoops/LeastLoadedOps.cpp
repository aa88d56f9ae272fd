//===- LeastLoadedOps.cpp - loops of LLEP's least-loaded assignment -----------===//
//
// moe.least_loaded (Least-Loaded Expert Parallelism, arXiv 2601.17111) runs on the
// host once per step: a sequential pass over the experts by descending load, each
// keeping what its native GPU can take under the capacity and spilling the rest, in
// chunks, to the other GPU with the least effective load. Integer token counts in
// i64; the capacity in double precision, as the paper's code computes it.
//
//===----------------------------------------------------------------------===//
#include "OpLowerings.h"

using namespace mlir;
using P = arith::CmpIPredicate;
using F = arith::CmpFPredicate;

namespace switchyard::moe {
using namespace emit;

namespace {

LogicalResult leastLoaded(RouterLowering &L, LeastLoadedOp op) {
  LoopEmitter &em = L.em();
  OpBuilder &b = em.builder();
  Location loc = em.location();
  int64_t n = sizeOf(op.getLoads()), gpus = op.getGpus(), perGpu = n / gpus;
  Type i64 = b.getI64Type(), f64 = b.getF64Type();
  Value loads = L.mem(op.getLoads()), plan = L.allocFull(op.getPlan());
  Value nativeOut = L.allocFull(op.getNativeLoads()), after = L.allocFull(op.getGpuLoads());
  Value moved = L.allocFull(op.getTransfers());
  auto loadOf = [&](Value e) {
    Value v = em.toI64(em.load(loads, e));
    return em.select(em.cmpI(P::slt, v, em.i64(0)), em.i64(0), v); // no negative loads
  };
  auto nativeOf = [&](Value e) { return em.divUI(e, em.idx(perGpu)); };

  // The GPUs' native loads; pending = native loads of experts not yet taken.
  Value pending = buffer(L, gpus, i64), assigned = buffer(L, gpus, i64);
  Value taken = buffer(L, n, b.getI1Type());
  em.fill(pending, em.idx(gpus), em.i64(0));
  em.fill(assigned, em.idx(gpus), em.i64(0));
  em.loop(n, [&](Value e) {
    em.store(em.cmpI(P::ne, em.i32(0), em.i32(0)), taken, e);
    em.loop(gpus, [&](Value g) { em.store(em.i32(0), plan, {e, g}); });
    Value g = nativeOf(e);
    em.store(em.addI(em.load(pending, g), loadOf(e)), pending, g);
  });
  Value total =
      em.loopCarried(em.idx(0), em.idx(gpus), {em.i64(0)}, [&](Value g, ValueRange it) {
        em.store(arith::SIToFPOp::create(b, loc, b.getF32Type(), em.load(pending, g)),
                 nativeOut, g);
        return SmallVector<Value>{em.addI(it[0], em.load(pending, g))};
      })[0];

  // C = max(1, int(factor * (total / gpus))), or total when total / gpus is 0.
  Value balanced = arith::DivSIOp::create(b, loc, total, em.i64(gpus));
  Value scaled =
      em.mulF(arith::ExtFOp::create(b, loc, f64, L.scalar(op.getCapacityFactor())),
              arith::SIToFPOp::create(b, loc, f64, balanced));
  Value limit = arith::SIToFPOp::create(b, loc, f64, em.i64(INT64_MAX / 2));
  scaled = em.select(em.cmpF(F::OGT, scaled, limit), limit, scaled);
  Value cap = em.select(em.cmpI(P::sgt, balanced, em.i64(0)),
                        arith::FPToSIOp::create(b, loc, i64, scaled).getResult(), total);
  cap = em.select(em.cmpI(P::slt, cap, em.i64(1)), em.i64(1), cap);
  Value minChunk = L.scalar(op.getMinChunk());

  // Plain EP when the native placement is balanced enough: max / mean below the
  // threshold (f32, as moe.imbalance computes it).
  auto ratio = em.loopCarried(
      em.idx(0), em.idx(gpus), {em.f32(0), em.negInf()}, [&](Value g, ValueRange it) {
        Value v = em.load(nativeOut, g);
        return SmallVector<Value>{em.addF(it[0], v),
                                  arith::MaximumFOp::create(b, loc, it[1], v)};
      });
  Value imbalance = em.select(em.cmpF(F::OEQ, ratio[0], em.f32(0)), em.f32(1),
                              em.divF(ratio[1], em.divF(ratio[0], em.f32(double(gpus)))));
  Value threshold = L.scalar(op.getThreshold());
  Value plain =
      em.andI(em.cmpF(F::OGT, threshold, em.f32(0)), em.cmpF(F::OLT, imbalance, threshold));

  auto give = [&](Value e, Value g, Value tokens) {
    em.store(em.addI(em.load(plan, {e, g}), em.toI32(tokens)), plan, {e, g});
    em.store(em.addI(em.load(assigned, g), tokens), assigned, g);
  };
  auto effective = [&](Value g) {
    return em.addI(em.load(assigned, g), em.load(pending, g));
  };
  em.ifThenElse(
      plain, [&] { em.loop(n, [&](Value e) { give(e, nativeOf(e), loadOf(e)); }); },
      [&] {
        em.loop(n, [&](Value) {
          // The heaviest expert not yet taken (ties to the lower id).
          Value e = em.toIndex(em.loopCarried(
              em.idx(0), em.idx(n), {em.i32(-1), em.i64(-1)}, [&](Value x, ValueRange it) {
                Value v = loadOf(x);
                Value better =
                    em.andI(em.notI(em.load(taken, x)), em.cmpI(P::sgt, v, it[1]));
                return SmallVector<Value>{em.select(better, em.toI32(x), it[0]),
                                          em.select(better, v, it[1])};
              })[0]);
          em.store(em.cmpI(P::eq, em.i32(0), em.i32(0)), taken, e);
          Value load = loadOf(e), home = nativeOf(e);
          em.store(em.subI(em.load(pending, home), load), pending, home);
          Value room = em.subI(cap, effective(home));
          Value mine = em.select(em.cmpI(P::slt, room, em.i64(0)), em.i64(0), room);
          mine = em.select(em.cmpI(P::sgt, mine, load), load, mine);
          give(e, home, mine);
          Value rest = em.subI(load, mine);
          if (gpus == 1) {
            give(e, home, rest);
            return;
          }
          em.whileLoop(
              {rest}, [&](ValueRange s) { return em.cmpI(P::sgt, s[0], em.i64(0)); },
              [&](ValueRange s) {
                // The other GPU with the least effective load (ties to the lower id).
                Value h = em.toIndex(em.loopCarried(
                    em.idx(0), em.idx(gpus), {em.i32(-1), em.i64(0)},
                    [&](Value g, ValueRange it) {
                      Value v = effective(g);
                      Value better = em.andI(em.cmpI(P::ne, g, home),
                                             em.orI(em.cmpI(P::slt, it[0], em.i32(0)),
                                                    em.cmpI(P::slt, v, it[1])));
                      return SmallVector<Value>{em.select(better, em.toI32(g), it[0]),
                                                em.select(better, v, it[1])};
                    })[0]);
                Value room = em.subI(cap, effective(h));
                Value fits = em.cmpI(P::sle, s[0], room);
                Value ok = em.andI(em.cmpI(P::sgt, room, em.i64(0)),
                                   em.orI(fits, em.cmpI(P::sge, room, minChunk)));
                Value chunk = em.select(em.andI(ok, em.notI(fits)), room, s[0]);
                give(e, h, chunk);
                return SmallVector<Value>{em.subI(s[0], chunk)};
              });
        });
      });

  em.loop(gpus, [&](Value g) {
    em.store(arith::SIToFPOp::create(b, loc, b.getF32Type(), em.load(assigned, g)), after,
             g);
  });
  Value count =
      em.loopCarried(em.idx(0), em.idx(n), {em.i32(0)}, [&](Value e, ValueRange it) {
        Value home = nativeOf(e);
        Value c =
            em.loopCarried(em.idx(0), em.idx(gpus), {it[0]}, [&](Value g, ValueRange jt) {
              Value away = em.andI(em.cmpI(P::ne, g, home),
                                   em.cmpI(P::sgt, em.load(plan, {e, g}), em.i32(0)));
              return SmallVector<Value>{
                  em.addI(jt[0], em.select(away, em.i32(1), em.i32(0)))};
            })[0];
        return SmallVector<Value>{c};
      })[0];
  em.store(count, moved, em.idx(0));
  return success();
}

} // namespace

void registerLeastLoadedOpLowerings(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *context, MoeDialect *) {
    attachLoopLowerings<leastLoaded>(context);
  });
}

} // namespace switchyard::moe
