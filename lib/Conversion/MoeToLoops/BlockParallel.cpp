//===- BlockParallel.cpp - batch-wide counting and placement, block-parallel --===//
//
// The outputs a grouped-GEMM launcher needs (compacted active experts, vLLM's block
// aligned token order) are prefix sums and stable scatters over the whole batch. On
// the host they are plain sequential loops; in the GPU form (moe-lower-to-loops
// {lane-parallel}, outside token loops) they are written as parallel loops over
// CHUNKS of consecutive items, which moe-map-to-gpu spreads over the block:
//
//   1. each chunk counts its items per bucket,            (parallel over chunks)
//   2. each bucket turns its chunk counts into offsets,   (parallel over buckets)
//   3. each chunk places its items in order.              (parallel over chunks)
//
// The result is exactly the sequential order (stable within a bucket), with
// ceil(n / chunks) + chunks steps per thread instead of n on one thread.
//
//===----------------------------------------------------------------------===//
#include "OpLowerings.h"

using namespace mlir;
using P = arith::CmpIPredicate;

namespace switchyard::moe::emit {

/// Chunks of the scatters: at most enough to keep a 128..256-thread block busy (the
/// [chunks, buckets] counts take 128 KB of workspace for 256 experts), and at least
/// kMinChunkItems items each, so that a small batch does not pay for 128 chunks.
constexpr int64_t kScatterChunks = 128, kMinChunkItems = 16;

void chunkedLoop(RouterLowering &L, Value n, Value chunks,
                 function_ref<void(Value chunk, Value first, Value last)> body) {
  LoopEmitter &em = L.em();
  Value length = em.divUI(em.addI(n, em.subI(chunks, em.idx(1))), chunks);
  L.parallelLoop(chunks, [&](Value c) {
    Value first = em.minUI(em.mulI(c, length), n);
    Value last = em.minUI(em.addI(first, length), n);
    body(c, first, last);
  });
}

void stableScatter(RouterLowering &L, Value n, int64_t buckets,
                   function_ref<Value(Value)> bucketOf, function_ref<Value(Value)> base,
                   function_ref<void(Value, Value)> place) {
  LoopEmitter &em = L.em();
  OpBuilder &b = em.builder();
  Value counts =
      L.temporary(MemRefType::get({kScatterChunks, buckets}, b.getI32Type()), {});
  // clamp(ceil(n / kMinChunkItems), 1, kScatterChunks)
  Value wanted = em.divUI(em.addI(n, em.idx(kMinChunkItems - 1)), em.idx(kMinChunkItems));
  Value chunks = em.minUI(arith::MaxUIOp::create(b, em.location(), wanted, em.idx(1)),
                          em.idx(kScatterChunks));
  auto inRange = [&](Value bucket) {
    return em.andI(em.cmpI(P::sge, bucket, em.i32(0)),
                   em.cmpI(P::slt, bucket, em.i32(buckets)));
  };
  // 1. Per-chunk counts.
  chunkedLoop(L, n, chunks, [&](Value c, Value first, Value last) {
    em.loop(em.idx(0), em.idx(buckets), [&](Value k) {
      em.store(em.i32(0), counts, {c, k});
    });
    em.loop(first, last, [&](Value i) {
      Value k = bucketOf(i);
      em.ifThen(inRange(k), [&] {
        Value at = em.toIndex(k);
        em.store(em.addI(em.load(counts, {c, at}), em.i32(1)), counts, {c, at});
      });
    });
  });
  // 2. Per bucket: where each chunk's items start.
  L.parallelLoop(em.idx(buckets), [&](Value k) {
    em.loopCarried(em.idx(0), chunks, {base(k)}, [&](Value c, ValueRange it) {
      Value count = em.load(counts, {c, k});
      em.store(it[0], counts, {c, k});
      return SmallVector<Value>{em.addI(it[0], count)};
    });
  });
  // 3. Each chunk places its items in order.
  chunkedLoop(L, n, chunks, [&](Value c, Value first, Value last) {
    em.loop(first, last, [&](Value i) {
      Value k = bucketOf(i);
      em.ifThen(inRange(k), [&] {
        Value at = em.toIndex(k);
        Value pos = em.load(counts, {c, at});
        place(i, pos);
        em.store(em.addI(pos, em.i32(1)), counts, {c, at});
      });
    });
  });
}

void exclusiveScan(RouterLowering &L, Value n, Value out,
                   function_ref<Value(Value)> value) {
  LoopEmitter &em = L.em();
  int64_t maxChunks = 32;
  Value chunks = em.idx(maxChunks);
  Value sums = L.temporary(MemRefType::get({maxChunks}, em.builder().getI32Type()), {});
  chunkedLoop(L, n, chunks, [&](Value c, Value first, Value last) {
    Value sum = em.loopCarried(first, last, {em.i32(0)}, [&](Value i, ValueRange it) {
      return SmallVector<Value>{em.addI(it[0], value(i))};
    })[0];
    em.store(sum, sums, c);
  });
  chunkedLoop(L, n, chunks, [&](Value c, Value first, Value last) {
    Value base = em.loopCarried(em.idx(0), c, {em.i32(0)}, [&](Value d, ValueRange it) {
      return SmallVector<Value>{em.addI(it[0], em.load(sums, d))};
    })[0];
    em.loopCarried(first, last, {base}, [&](Value i, ValueRange it) {
      em.store(it[0], out, i);
      return SmallVector<Value>{em.addI(it[0], value(i))};
    });
  });
}

Value blockSum(RouterLowering &L, Value n, function_ref<Value(Value)> value) {
  return L.reduceLanes(n, L.em().i32(0), RouterLowering::Combine::AddI, value);
}

} // namespace switchyard::moe::emit
