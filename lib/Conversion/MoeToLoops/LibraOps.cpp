//===- LibraOps.cpp - loops of the Libra balancing ops ----------------------===//
//
// Rule ops run on the host once per scheduling interval: plain sequential loops over
// the experts (and devices), in the order the papers' pseudo-code gives.
// Libra: per-GPU requests, served loads, replication (App. B Alg. 1) and token
// sharding (App. C Alg. 2).
//
//===----------------------------------------------------------------------===//
#include "OpLowerings.h"

using namespace mlir;
using P = arith::CmpIPredicate;
using F = arith::CmpFPredicate;

namespace switchyard::moe {
using namespace emit;

namespace {

LogicalResult gpuRequests(RouterLowering &L, GpuRequestsOp op) {
  LoopEmitter &em = L.em();
  auto type = cast<ShapedType>(op.getResult().getType());
  int64_t gpus = type.getDimSize(0), experts = type.getDimSize(1);
  int64_t k = cast<ShapedType>(op.getIds().getType()).getDimSize(1);
  Value ids = L.mem(op.getIds()), where = L.mem(op.getTokenGpu());
  Value out = L.allocFull(op.getResult());
  em.loop(gpus, [&](Value g) {
    em.loop(experts, [&](Value e) { em.store(em.i32(0), out, {g, e}); });
  });
  em.loop(em.idx(0), L.tokens(), [&](Value t) {
    Value g = em.load(where, t);
    Value gOk = em.andI(em.cmpI(P::sge, g, em.i32(0)), em.cmpI(P::slt, g, em.i32(gpus)));
    em.loop(k, [&](Value j) {
      Value e = em.load(ids, {t, j});
      Value ok = em.andI(
          gOk, em.andI(em.cmpI(P::sge, e, em.i32(0)), em.cmpI(P::slt, e, em.i32(experts))));
      em.ifThen(ok, [&] {
        Value gi = em.toIndex(g), ei = em.toIndex(e);
        em.store(em.addI(em.load(out, {gi, ei}), em.i32(1)), out, {gi, ei});
      });
    });
  });
  return success();
}

/// Libra's load model over requests [G, E] and an optional placement [E, G]: the GPU
/// that serves GPU g's requests for e (g if it hosts e, else e's home).
class LibraLoads {
public:
  LibraLoads(RouterLowering &L, Value requests, int64_t gpus, int64_t experts)
      : L(L), em(L.em()), requests(requests), gpus(gpus), experts(experts) {}
  Value home(Value e) { return em.divUI(e, em.idx(experts / gpus)); }
  Value hosts(Value placement, Value e, Value g) {
    return placement ? em.cmpI(P::ne, em.load(placement, {e, g}), em.i32(0))
                     : em.cmpI(P::eq, home(e), g);
  }
  Value requested(Value g, Value e) { return em.load(requests, {g, e}); }
  /// loads[h] (i32) = requests served on h.
  void served(Value placement, Value loads) {
    em.fill(loads, em.idx(gpus), em.i32(0));
    em.loop(gpus, [&](Value g) {
      em.loop(experts, [&](Value e) {
        Value h = em.select(hosts(placement, e, g), g, home(e));
        em.store(em.addI(em.load(loads, h), requested(g, e)), loads, h);
      });
    });
  }
  /// B = total requests / G, in f32.
  Value target() {
    Value total =
        em.loopCarried(em.idx(0), em.idx(gpus), {em.i32(0)}, [&](Value g, ValueRange it) {
          Value row = em.loopCarried(
              em.idx(0), em.idx(experts), {it[0]}, [&](Value e, ValueRange r) {
                return SmallVector<Value>{em.addI(r[0], requested(g, e))};
              })[0];
          return SmallVector<Value>{row};
        })[0];
    return em.divF(em.toF32(total), em.f32(static_cast<double>(gpus)));
  }

private:
  RouterLowering &L;
  LoopEmitter &em;
  Value requests;
  int64_t gpus, experts;
};

LogicalResult servedLoads(RouterLowering &L, ServedLoadsOp op) {
  LoopEmitter &em = L.em();
  auto type = cast<ShapedType>(op.getRequests().getType());
  int64_t gpus = type.getDimSize(0), experts = type.getDimSize(1);
  LibraLoads model(L, L.mem(op.getRequests()), gpus, experts);
  Value counts = buffer(L, gpus, em.builder().getI32Type());
  model.served(op.getPlacement() ? L.mem(op.getPlacement()) : Value(), counts);
  Value out = L.allocFull(op.getResult());
  em.loop(gpus, [&](Value g) { em.store(em.toF32(em.load(counts, g)), out, g); });
  return success();
}

LogicalResult libraReplicate(RouterLowering &L, LibraReplicateOp op) {
  LoopEmitter &em = L.em();
  OpBuilder &b = em.builder();
  auto type = cast<ShapedType>(op.getRequests().getType());
  int64_t gpus = type.getDimSize(0), experts = type.getDimSize(1);
  Value req = L.mem(op.getRequests()), m = L.allocFull(op.getPlacement());
  LibraLoads model(L, req, gpus, experts);
  // At most one extra replica per expert can be placed: clamping to E keeps the float
  // product below exact-conversion range.
  Value n = em.toI64(emit::clampedCount(em, L.scalar(op.getExtra()), experts));
  // L = floor(N * alpha), at most N.
  Value local = arith::FPToSIOp::create(
      b, em.location(), b.getI64Type(),
      math::FloorOp::create(b, em.location(),
                            em.mulF(em.toF32(n), L.scalar(op.getAlpha()))));
  local = em.select(em.cmpI(P::sgt, local, n), n, local);
  local = em.select(em.cmpI(P::slt, local, em.i64(0)), em.i64(0), local);
  Value extra = buffer(L, gpus, b.getI32Type());
  em.fill(extra, em.idx(gpus), em.i32(0));
  em.loop(experts, [&](Value e) {
    em.loop(gpus, [&](Value g) {
      em.store(em.select(em.cmpI(P::eq, model.home(e), g), em.i32(1), em.i32(0)), m,
               {e, g});
    });
  });
  // Phase 1: each GPU imports its top L requested remote experts.
  Value taken = buffer(L, experts, b.getI8Type());
  em.loop(gpus, [&](Value g) {
    em.fill(taken, em.idx(experts), em.i8(0));
    emit::topKRow(
        L, em.idx(experts), em.toIndex(local), experts, taken,
        [&](Value e) {
          return em.andI(em.cmpI(P::ne, model.home(e), g),
                         em.cmpI(P::sgt, model.requested(g, e), em.i32(0)));
        },
        [&](Value e) { return em.toF32(model.requested(g, e)); },
        [&](Value, Value id, Value) {
          em.ifThen(em.cmpI(P::sge, id, em.i32(0)), [&] {
            em.store(em.i32(1), m, {em.toIndex(id), g});
            em.store(em.addI(em.load(extra, g), em.i32(1)), extra, g);
          });
        });
  });
  // Phase 2: iterative duplication towards the target load.
  Value loads = buffer(L, gpus, b.getI32Type());
  model.served(m, loads);
  // remote[e]: requests for e served at its home by GPUs without a copy, kept up to
  // date as copies are added (a step then costs O(G + E/G)).
  Value remote = buffer(L, experts, b.getI32Type());
  em.loop(experts, [&](Value e) {
    Value sum =
        em.loopCarried(em.idx(0), em.idx(gpus), {em.i32(0)}, [&](Value g, ValueRange it) {
          return SmallVector<Value>{em.select(model.hosts(m, e, g), it[0],
                                              em.addI(it[0], model.requested(g, e)))};
        })[0];
    em.store(sum, remote, e);
  });
  Value target = model.target();
  Value stop = buffer(L, 1, b.getI8Type());
  em.store(em.i8(0), stop, em.idx(0));
  Value steps = em.toIndex(em.mulI(em.subI(n, local), em.i64(gpus)));
  Value n32 = em.toI32(n);
  em.loop(em.idx(0), steps, [&](Value) {
    em.ifThen(em.notI(em.isSet(stop, em.idx(0))), [&] {
      auto [src, unusedLoad] = em.argBest(
          em.idx(gpus),
          [&](Value g) { return em.cmpF(F::OGT, em.toF32(em.load(loads, g)), target); },
          [&](Value g) { return em.toF32(em.load(loads, g)); });
      (void)unusedLoad;
      Value srcOk = em.cmpI(P::sge, src, em.i32(0));
      Value s = em.toIndex(em.select(srcOk, src, em.i32(0)));
      // The expert homed on src with the most remote requests (only src's E/G experts).
      Value base = em.mulI(s, em.idx(experts / gpus));
      auto [local, hotLoad] = em.argBest(
          em.idx(experts / gpus),
          [&](Value i) {
            return em.cmpI(P::sgt, em.load(remote, em.addI(base, i)), em.i32(0));
          },
          [&](Value i) { return em.toF32(em.load(remote, em.addI(base, i))); });
      (void)hotLoad;
      Value hot = em.select(em.cmpI(P::sge, local, em.i32(0)),
                            em.addI(local, em.toI32(base)), em.i32(-1));
      Value hotOk = em.andI(srcOk, em.cmpI(P::sge, hot, em.i32(0)));
      Value e = em.toIndex(em.select(hotOk, hot, em.i32(0)));
      auto [dst, negLoad] = em.argBest(
          em.idx(gpus),
          [&](Value g) {
            return em.andI(em.andI(em.cmpI(P::ne, g, s), em.notI(model.hosts(m, e, g))),
                           em.cmpI(P::slt, em.load(extra, g), n32));
          },
          [&](Value g) {
            return arith::NegFOp::create(b, em.location(), em.toF32(em.load(loads, g)))
                .getResult();
          });
      (void)negLoad;
      Value dstOk = em.andI(hotOk, em.cmpI(P::sge, dst, em.i32(0)));
      Value d = em.toIndex(em.select(dstOk, dst, em.i32(0)));
      Value moved = model.requested(d, e);
      Value after = em.addI(em.load(loads, d), moved);
      Value fits = em.andI(dstOk, em.cmpF(F::OLE, em.toF32(after), target));
      em.ifThenElse(
          fits,
          [&] {
            em.store(em.i32(1), m, {e, d});
            em.store(em.addI(em.load(extra, d), em.i32(1)), extra, d);
            em.store(after, loads, d);
            em.store(em.subI(em.load(loads, s), moved), loads, s);
            em.store(em.subI(em.load(remote, e), moved), remote, e);
          },
          [&] { em.store(em.i8(1), stop, em.idx(0)); });
    });
  });
  return success();
}

/// `for (i = 0; i < n && !stop(); ++i) body()`.
void loopUntil(LoopEmitter &em, int64_t n, function_ref<Value()> stop,
               function_ref<void()> body) {
  em.whileLoop(
      {em.idx(0)},
      [&](ValueRange it) {
        return em.andI(em.cmpI(P::ult, it[0], em.idx(n)), em.notI(stop()));
      },
      [&](ValueRange it) {
        body();
        return SmallVector<Value>{em.addI(it[0], em.idx(1))};
      });
}

LogicalResult libraShard(RouterLowering &L, LibraShardOp op) {
  LoopEmitter &em = L.em();
  OpBuilder &b = em.builder();
  auto type = cast<ShapedType>(op.getRequests().getType());
  int64_t gpus = type.getDimSize(0), experts = type.getDimSize(1);
  Value req = L.mem(op.getRequests()), m = L.mem(op.getPlacement());
  Value r = L.allocFull(op.getShardPlan()), out = L.allocFull(op.getLoads());
  LibraLoads model(L, req, gpus, experts);
  // Local loads, remote loads at the home GPUs, GPU loads.
  Value loads = buffer(L, gpus, b.getI32Type());
  em.fill(loads, em.idx(gpus), em.i32(0));
  em.loop(gpus, [&](Value g) {
    em.loop(experts, [&](Value e) { em.store(em.i32(0), r, {g, e}); });
  });
  em.loop(gpus, [&](Value g) {
    em.loop(experts, [&](Value e) {
      Value here = model.hosts(m, e, g);
      Value h = em.select(here, g, model.home(e));
      em.store(em.addI(em.load(loads, h), model.requested(g, e)), loads, h);
      em.ifThen(em.notI(here), [&] {
        em.store(em.addI(em.load(r, {h, e}), model.requested(g, e)), r, {h, e});
      });
    });
  });
  Value target = model.target();
  Value limit = em.mulF(em.addF(em.f32(1), L.scalar(op.getEpsilon())), target);
  auto loadOf = [&](Value g) { return em.toF32(em.load(loads, g)); };
  // state: [done, moved]
  Value state = buffer(L, 2, b.getI8Type());
  Value visitedG = buffer(L, gpus, b.getI8Type());
  // Copies of each expert (the placement does not change while sharding).
  Value hostCount = buffer(L, experts, b.getI32Type());
  em.loop(experts, [&](Value e) {
    Value n =
        em.loopCarried(em.idx(0), em.idx(gpus), {em.i32(0)}, [&](Value g, ValueRange it) {
          return SmallVector<Value>{
              em.select(model.hosts(m, e, g), em.addI(it[0], em.i32(1)), it[0])};
        })[0];
    em.store(n, hostCount, e);
  });
  auto flag = [&](int i) { return em.isSet(state, em.idx(i)); };
  auto setFlag = [&](int i, int64_t v) { em.store(em.i8(v), state, em.idx(i)); };
  setFlag(0, 0);
  // Until balanced or stuck (at most 4*G*E transfers).
  em.whileLoop(
      {em.idx(0)},
      [&](ValueRange it) {
        return em.andI(em.cmpI(P::ult, it[0], em.idx(4 * gpus * experts)),
                       em.notI(flag(0)));
      },
      [&](ValueRange it) {
        {
          Value maxLoad = em.loopCarried(
              em.idx(0), em.idx(gpus), {em.negInf()}, [&](Value g, ValueRange it) {
                return SmallVector<Value>{
                    arith::MaximumFOp::create(b, em.location(), it[0], loadOf(g))};
              })[0];
          em.ifThenElse(
              em.cmpF(F::OGT, maxLoad, limit),
              [&] {
                setFlag(1, 0);
                em.fill(visitedG, em.idx(gpus), em.i8(0));
                // Sources in descending load, experts in descending remote load, first
                // feasible transfer wins.
                loopUntil(
                    em, gpus, [&] { return flag(1); },
                    [&] {
                      {
                        auto [src, unused] = em.argBest(
                            em.idx(gpus),
                            [&](Value g) {
                              return em.andI(em.notI(em.isSet(visitedG, g)),
                                             em.cmpF(F::OGT, loadOf(g), target));
                            },
                            loadOf);
                        (void)unused;
                        em.ifThen(em.cmpI(P::sge, src, em.i32(0)), [&] {
                          Value s = em.toIndex(src);
                          em.store(em.i8(1), visitedG, s);
                          // The first feasible expert in descending R[s, e] (ties lower id)
                          // is the feasible one with the largest R: one pass, and the
                          // destination search (O(G)) only for replicated experts that
                          // could win.
                          auto best = em.loopCarried(
                              em.idx(0), em.idx(experts),
                              {em.i32(-1), em.i32(0), em.i32(0), em.i32(0)},
                              [&](Value e, ValueRange it) {
                                Value have = em.load(r, {s, e});
                                Value better = em.orI(em.cmpI(P::slt, it[0], em.i32(0)),
                                                      em.cmpI(P::sgt, have, it[1]));
                                Value cand =
                                    em.andI(em.andI(em.cmpI(P::sgt, have, em.i32(0)),
                                                    em.cmpI(P::sge, em.load(hostCount, e),
                                                            em.i32(2))),
                                            better);
                                auto ifOp = scf::IfOp::create(
                                    b, em.location(),
                                    TypeRange{b.getI32Type(), b.getI32Type()}, cand,
                                    /*withElseRegion=*/true);
                                {
                                  OpBuilder::InsertionGuard guard(b);
                                  b.setInsertionPointToStart(ifOp.thenBlock());
                                  auto [dst, unusedD] = em.argBest(
                                      em.idx(gpus),
                                      [&](Value g) {
                                        return em.andI(em.cmpI(P::ne, g, s),
                                                       model.hosts(m, e, g));
                                      },
                                      [&](Value g) {
                                        return arith::NegFOp::create(b, em.location(),
                                                                     loadOf(g))
                                            .getResult();
                                      });
                                  (void)unusedD;
                                  Value dOk = em.cmpI(P::sge, dst, em.i32(0));
                                  Value d = em.toIndex(em.select(dOk, dst, em.i32(0)));
                                  Value room = math::FloorOp::create(
                                      b, em.location(), em.subF(target, loadOf(d)));
                                  Value cap = arith::FPToSIOp::create(b, em.location(),
                                                                      b.getI32Type(), room);
                                  Value ok = em.andI(dOk, em.cmpI(P::sge, cap, em.i32(1)));
                                  scf::YieldOp::create(
                                      b, em.location(),
                                      ValueRange{em.select(ok, dst, em.i32(-1)), cap});
                                  b.setInsertionPointToStart(ifOp.elseBlock());
                                  scf::YieldOp::create(b, em.location(),
                                                       ValueRange{em.i32(-1), em.i32(0)});
                                }
                                Value take = em.cmpI(P::sge, ifOp.getResult(0), em.i32(0));
                                return SmallVector<Value>{
                                    em.select(take, em.toI32(e), it[0]),
                                    em.select(take, have, it[1]),
                                    em.select(take, ifOp.getResult(0), it[2]),
                                    em.select(take, ifOp.getResult(1), it[3])};
                              });
                          em.ifThen(em.cmpI(P::sge, best[0], em.i32(0)), [&] {
                            Value e = em.toIndex(best[0]), d = em.toIndex(best[2]);
                            Value have = best[1], cap = best[3];
                            Value l = em.select(em.cmpI(P::slt, have, cap), have, cap);
                            em.store(em.subI(have, l), r, {s, e});
                            em.store(em.addI(em.load(r, {d, e}), l), r, {d, e});
                            em.store(em.subI(em.load(loads, s), l), loads, s);
                            em.store(em.addI(em.load(loads, d), l), loads, d);
                            setFlag(1, 1);
                          });
                        });
                      }
                    });
                em.ifThen(em.notI(flag(1)), [&] { setFlag(0, 1); });
              },
              [&] { setFlag(0, 1); });
        }
        return SmallVector<Value>{em.addI(it[0], em.idx(1))};
      });
  em.loop(gpus, [&](Value g) { em.store(loadOf(g), out, g); });
  return success();
}

} // namespace

void registerLibraOpLowerings(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *context, MoeDialect *) {
    attachLoopLowerings<gpuRequests, servedLoads, libraReplicate, libraShard>(context);
  });
}

} // namespace switchyard::moe
