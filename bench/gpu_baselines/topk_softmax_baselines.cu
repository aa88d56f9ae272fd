// topk_softmax_baselines.cu - hand-written GPU baselines for the standard router's nine
// outputs, the yardsticks the GPU kit times Switchyard's generated kernels against
// (scripts/gpu_kit/step_baselines.py). Written by us from the published designs; never
// shipped, never called by the package.
//
// The outputs are topk_softmax.mlir's at E experts, top-K, block B (Qwen3-30B-A3B: 128,
// 8, 64): topk_ids / topk_weights (the softmax over the K selected logits), selected (the
// union of the top-K), expert_counts, active_experts (-1 after them) and num_active,
// and vLLM's moe_align_block_size layout: sorted_token_ids (slots t*K + j grouped by
// expert, each expert's segment padded to B with the sentinel T*K), expert_ids (each
// block's expert, -1 past the end) and num_tokens_post_padded.
//
// * best (2 launches): one warp per token with its row in registers (E / 32 logits a
//   lane) and K arg-max rounds on a packed score|~id key (ties to the lower id, as the
//   host); each CTA's per-warp histograms in shared memory give every slot its stable
//   rank in the CTA and the CTA's counts; the second launch sums the CTAs' counts, scans
//   the padded counts, and every CTA places its own slots (token order within an
//   expert, exactly the host's layout). No atomics, no global-memory chains.
// * prod3 (3 launches, the structure of vLLM's topk_softmax + moe_align_block_size): a
//   top-K kernel, one CTA counting every slot with shared-memory atomics and scanning,
//   then a scatter by per-expert atomic cursors (the order within an expert is not the
//   host's).
//
// On the CPU (-DSWITCHYARD_CUDA_ON_HOST, switchyard/Cuda/CudaOnHost.h) the same source
// runs on CPU threads: test/gpu/test_gpu_baselines.py checks both against the host.
#include "switchyard/Cuda/KernelPrelude.h"

#ifdef SWITCHYARD_CUDA_ON_HOST
#define SY_SHARED static
typedef void *cudaStream_t;
#define SY_LAUNCH(kernel, grid, block, stream, ...)                                        \
  do {                                                                                     \
    switchyard_host_launch((grid), (block));                                               \
    syRunGrid(#kernel, 0, [&] { kernel(__VA_ARGS__); });                                   \
  } while (0)
#else
#define SY_SHARED __shared__
#define SY_LAUNCH(kernel, grid, block, stream, ...)                                        \
  kernel<<<(grid), (block), 0, (stream)>>>(__VA_ARGS__)
#endif

namespace {

constexpr int kE = 128, kK = 8, kB = 64;          // experts, top-k, alignment block
constexpr int kWarps = 8, kThreads = 32 * kWarps; // a CTA
constexpr int kTokensPerWarp = 4, kTokensPerCta = kWarps * kTokensPerWarp;
constexpr int kPerLane = kE / 32;
static_assert(kE % 32 == 0 && kK <= 32 && kE <= kThreads, "shape");

struct Outputs {
  int32_t *ids;
  float *weights;
  int8_t *selected;
  int32_t *counts, *active, *numActive;
  int32_t *sorted;
  int64_t sortedSize;
  int32_t *blocks;
  int64_t blockCount;
  int32_t *padded;
};

/// The rank of a float in IEEE total order (-0 as +0, NaN lowest) + 1, above ~id: an
/// unsigned maximum is the host's ranking, ties to the lower id.
__device__ inline uint64_t packedKey(float v, int e) {
  uint32_t bits = syBitcast<uint32_t>(v + 0.0f);
  uint32_t rank = (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
  if (isnan(v))
    rank = 0;
  return (uint64_t(rank) + 1) << 32 | uint32_t(~uint32_t(e));
}

__device__ inline uint64_t warpMax(uint64_t key) {
  for (int offset = 16; offset >= 1; offset /= 2) {
    uint64_t other = __shfl_xor_sync(0xffffffffu, key, offset);
    key = other > key ? other : key;
  }
  return key;
}

__device__ inline float warpSum(float v) {
  for (int offset = 16; offset >= 1; offset /= 2)
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

/// Token t's top-K by one warp, its logits in registers: lane j < K returns slot j's
/// id and weight (the softmax over the K selected logits).
__device__ inline void topKOfRow(const float *row, int lane, int32_t &id, float &weight) {
  float x[kPerLane];
  uint64_t keys[kPerLane];
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    x[i] = row[lane + 32 * i];
    keys[i] = packedKey(x[i], lane + 32 * i);
  }
  float best = 0.0f, mine = 0.0f;
  id = -1;
#pragma unroll
  for (int j = 0; j < kK; ++j) {
    uint64_t local = 0;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i)
      local = keys[i] > local ? keys[i] : local;
    uint64_t winner = warpMax(local);
    int e = int(~uint32_t(winner));
    // The winner is taken; its logit comes from the lane that holds it. (Constant
    // indices only: the row stays in registers.)
    float v = 0.0f;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i)
      if (lane + 32 * i == e) {
        keys[i] = 0;
        v = x[i];
      }
    v = __shfl_sync(0xffffffffu, v, e & 31);
    if (j == 0)
      best = v;
    if (lane == j) {
      id = e;
      mine = v;
    }
  }
  float p = lane < kK ? expf(mine - best) : 0.0f;
  weight = p / warpSum(p);
}

/// best, launch 1: each warp its tokens' top-K; per-warp histograms in shared memory give
/// each slot its rank among the CTA's slots of its expert (token order), stored with the
/// CTA's counts in the workspace.
__global__ void bestRoute(int64_t tokens, const float *logits, Outputs out,
                          int32_t *ctaCounts, int32_t *slotRank) {
  SY_SHARED int32_t hist[kWarps][kE];
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int e = threadIdx.x; e < kWarps * kE; e += blockDim.x)
    hist[e / kE][e % kE] = 0;
  __syncthreads();
  int64_t first = int64_t(blockIdx.x) * kTokensPerCta + int64_t(warp) * kTokensPerWarp;
  int32_t ranks[kTokensPerWarp];
  int32_t ids[kTokensPerWarp];
#pragma unroll
  for (int i = 0; i < kTokensPerWarp; ++i) {
    int64_t t = first + i;
    ids[i] = -1;
    ranks[i] = 0;
    if (t >= tokens)
      continue;
    float w;
    topKOfRow(logits + t * kE, lane, ids[i], w);
    if (lane < kK) {
      out.ids[t * kK + lane] = ids[i];
      out.weights[t * kK + lane] = w;
    }
    // The K ids of a token differ, so the lanes touch different counters.
    if (lane < kK && ids[i] >= 0)
      ranks[i] = hist[warp][ids[i]]++;
    __syncwarp();
  }
  __syncthreads();
  // Per expert: the warps' counts become offsets (warp order = token order).
  for (int e = threadIdx.x; e < kE; e += blockDim.x) {
    int32_t sum = 0;
    for (int w = 0; w < kWarps; ++w) {
      int32_t c = hist[w][e];
      hist[w][e] = sum;
      sum += c;
    }
    ctaCounts[int64_t(blockIdx.x) * kE + e] = sum;
  }
  __syncthreads();
#pragma unroll
  for (int i = 0; i < kTokensPerWarp; ++i) {
    int64_t t = first + i;
    if (t < tokens && lane < kK && ids[i] >= 0)
      slotRank[t * kK + lane] = hist[warp][ids[i]] + ranks[i];
  }
}

/// Exclusive scan of v over the CTA's first kE threads (the others pass 0); the total
/// comes back in `total`.
__device__ inline int32_t blockExclusiveScan(int32_t v, int32_t *scratch, int32_t &total) {
  if (threadIdx.x < kE)
    scratch[threadIdx.x] = v;
  __syncthreads();
  // Hillis-Steele over kE values (kE <= blockDim).
  for (int offset = 1; offset < kE; offset *= 2) {
    int32_t add =
        (threadIdx.x < kE && threadIdx.x >= offset) ? scratch[threadIdx.x - offset] : 0;
    __syncthreads();
    if (threadIdx.x < kE)
      scratch[threadIdx.x] += add;
    __syncthreads();
  }
  int32_t inclusive = threadIdx.x < kE ? scratch[threadIdx.x] : 0;
  total = scratch[kE - 1];
  __syncthreads();
  return inclusive - v;
}

/// The per-expert outputs of a block that knows every expert's count (thread e < kE
/// holds expert e's `count`, the others 0) and the padded total: counts, selected,
/// the active experts in id order (-1 after them), their number, the padded total.
__device__ inline void writeExpertOutputs(Outputs out, int32_t count, int32_t total,
                                          int32_t *scratch) {
  int32_t has = count > 0 ? 1 : 0, active = 0;
  int32_t at = blockExclusiveScan(has, scratch, active);
  if (threadIdx.x < kE) {
    out.counts[threadIdx.x] = count;
    out.selected[threadIdx.x] = int8_t(has);
    out.active[threadIdx.x] = -1;
  }
  __syncthreads();
  if (has)
    out.active[at] = int32_t(threadIdx.x);
  if (threadIdx.x == 0) {
    out.numActive[0] = active;
    out.padded[0] = total;
  }
}

/// best, launch 2: every CTA sums the CTAs' counts (and those before it), scans the
/// padded counts, and places its own slots; CTA 0 writes the per-expert outputs, each CTA
/// the padding of its share of the experts.
__global__ void bestPlace(int64_t tokens, Outputs out, const int32_t *ctaCounts,
                          const int32_t *slotRank) {
  SY_SHARED int32_t scratch[kE];
  SY_SHARED int32_t before[kE], start[kE], count[kE];
  int64_t grid = (tokens + kTokensPerCta - 1) / kTokensPerCta, cta = blockIdx.x;
  int32_t c = 0, mine = 0;
  if (threadIdx.x < kE) {
    for (int64_t g = 0; g < grid; ++g) {
      int32_t n = ctaCounts[g * kE + threadIdx.x];
      mine += g < cta ? n : 0;
      c += n;
    }
    before[threadIdx.x] = mine;
    count[threadIdx.x] = c;
  }
  int32_t paddedCount = (c + kB - 1) / kB * kB, total = 0;
  int32_t s = blockExclusiveScan(threadIdx.x < kE ? paddedCount : 0, scratch, total);
  if (threadIdx.x < kE)
    start[threadIdx.x] = s;
  __syncthreads();
  // This CTA's slots.
  int64_t firstSlot = cta * kTokensPerCta * kK;
  int64_t endSlot = firstSlot + kTokensPerCta * kK;
  if (endSlot > tokens * kK)
    endSlot = tokens * kK;
  for (int64_t slot = firstSlot + threadIdx.x; slot < endSlot; slot += blockDim.x) {
    int32_t e = out.ids[slot];
    if (e < 0 || e >= kE)
      continue;
    int64_t pos = int64_t(start[e]) + before[e] + slotRank[slot];
    if (pos < out.sortedSize)
      out.sorted[pos] = int32_t(slot);
    if ((pos - start[e]) % kB == 0 && pos / kB < out.blockCount)
      out.blocks[pos / kB] = e;
  }
  // Padding: each CTA the experts e = cta, cta + grid, ... (disjoint from the slots).
  for (int e = int(cta); e < kE; e += int(grid)) {
    int64_t from = int64_t(start[e]) + count[e],
            to = int64_t(start[e]) + (count[e] + kB - 1) / kB * kB;
    for (int64_t p = from + threadIdx.x; p < to && p < out.sortedSize; p += blockDim.x)
      out.sorted[p] = int32_t(tokens * kK);
  }
  if (cta != 0)
    return;
  for (int64_t p = total + threadIdx.x; p < out.sortedSize; p += blockDim.x)
    out.sorted[p] = int32_t(tokens * kK);
  for (int64_t b = total / kB + threadIdx.x; b < out.blockCount; b += blockDim.x)
    out.blocks[b] = -1;
  writeExpertOutputs(out, threadIdx.x < kE ? count[threadIdx.x] : 0, total, scratch);
}

/// prod3, launch 1: top-K, one warp per token.
__global__ void prodTopK(int64_t tokens, const float *logits, Outputs out) {
  int lane = threadIdx.x % 32;
  int64_t t = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (t >= tokens)
    return;
  int32_t id;
  float w;
  topKOfRow(logits + t * kE, lane, id, w);
  if (lane < kK) {
    out.ids[t * kK + lane] = id;
    out.weights[t * kK + lane] = w;
  }
}

/// prod3, launch 2: one CTA counts every slot (shared-memory atomics), scans, writes the
/// per-expert outputs, block ids and sentinels, and leaves each expert's cursor.
__global__ void prodCount(int64_t tokens, Outputs out, int32_t *cursor) {
  SY_SHARED int32_t count[kE], scratch[kE];
  if (threadIdx.x < kE)
    count[threadIdx.x] = 0;
  __syncthreads();
  for (int64_t slot = threadIdx.x; slot < tokens * kK; slot += blockDim.x) {
    int32_t e = out.ids[slot];
    if (e >= 0 && e < kE)
      atomicAdd(&count[e], 1);
  }
  __syncthreads();
  int32_t c = threadIdx.x < kE ? count[threadIdx.x] : 0, total = 0;
  int32_t start = blockExclusiveScan((c + kB - 1) / kB * kB, scratch, total);
  for (int64_t p = threadIdx.x; p < out.sortedSize; p += blockDim.x)
    out.sorted[p] = int32_t(tokens * kK);
  for (int64_t b = threadIdx.x; b < out.blockCount; b += blockDim.x)
    out.blocks[b] = b < total / kB ? 0 : -1;
  __syncthreads();
  if (threadIdx.x < kE) {
    for (int32_t b = start / kB; b < (start + (c + kB - 1) / kB * kB) / kB; ++b)
      if (b < out.blockCount)
        out.blocks[b] = int32_t(threadIdx.x);
    cursor[threadIdx.x] = start;
  }
  writeExpertOutputs(out, c, total, scratch);
}

/// prod3, launch 3: each slot takes the next place of its expert (atomic cursor).
__global__ void prodScatter(int64_t tokens, Outputs out, int32_t *cursor) {
  int64_t slot = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (slot >= tokens * kK)
    return;
  int32_t e = out.ids[slot];
  if (e < 0 || e >= kE)
    return;
  int32_t pos = atomicAdd(&cursor[e], 1);
  if (pos < out.sortedSize)
    out.sorted[pos] = int32_t(slot);
}

Outputs outputsOf(int32_t *ids, float *weights, int8_t *selected, int32_t *counts,
                  int32_t *active, int32_t *numActive, int32_t *sorted, int64_t sortedSize,
                  int32_t *blocks, int64_t blockCount, int32_t *padded) {
  return Outputs{ids,    weights,    selected, counts,     active, numActive,
                 sorted, sortedSize, blocks,   blockCount, padded};
}

} // namespace

#define SY_BASELINE_PARAMS                                                                 \
  int64_t tokens, const float *logits, int32_t *ids, float *weights, int8_t *selected,     \
      int32_t *counts, int32_t *active, int32_t *numActive, int32_t *sorted,               \
      int64_t sortedSize, int32_t *blocks, int64_t blockCount, int32_t *padded,            \
      void *workspace, cudaStream_t stream

/// The workspace either baseline needs for `tokens` tokens.
SY_EXPORT int64_t sy_baseline_workspace_bytes(int64_t tokens) {
  int64_t ctas = (tokens + kTokensPerCta - 1) / kTokensPerCta;
  return 4 * (ctas * kE + tokens * kK + kE);
}

SY_EXPORT void sy_baseline_best(SY_BASELINE_PARAMS) {
  Outputs out = outputsOf(ids, weights, selected, counts, active, numActive, sorted,
                          sortedSize, blocks, blockCount, padded);
  int64_t ctas = (tokens + kTokensPerCta - 1) / kTokensPerCta;
  int32_t *ctaCounts = static_cast<int32_t *>(workspace);
  int32_t *slotRank = ctaCounts + ctas * kE;
  if (tokens <= 0)
    return;
  SY_LAUNCH(bestRoute, unsigned(ctas), kThreads, stream, tokens, logits, out, ctaCounts,
            slotRank);
  SY_LAUNCH(bestPlace, unsigned(ctas), kThreads, stream, tokens, out, ctaCounts, slotRank);
}

SY_EXPORT void sy_baseline_prod3(SY_BASELINE_PARAMS) {
  Outputs out = outputsOf(ids, weights, selected, counts, active, numActive, sorted,
                          sortedSize, blocks, blockCount, padded);
  int32_t *cursor = static_cast<int32_t *>(workspace);
  if (tokens <= 0)
    return;
  SY_LAUNCH(prodTopK, unsigned((tokens + kWarps - 1) / kWarps), kThreads, stream, tokens,
            logits, out);
  SY_LAUNCH(prodCount, 1u, 1024u, stream, tokens, out, cursor);
  SY_LAUNCH(prodScatter, unsigned((tokens * kK + 255) / 256), 256u, stream, tokens, out,
            cursor);
}
