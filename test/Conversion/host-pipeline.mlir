// moe-host-pipeline lowers a router to the LLVM dialect; moe-emit-c-entry adds the
// flat C entry point `int32_t r(int64_t num_tokens, const float *logits, ...)`.
// RUN: moe-opt %s --moe-host-pipeline | FileCheck %s
// RUN: moe-opt %s --moe-host-pipeline | moe-translate --mlir-to-llvmir | FileCheck %s --check-prefix=LLVMIR

// CHECK-NOT: moe.router
// CHECK: llvm.func @r(%[[T:.*]]: i64, %[[L:.*]]: !llvm.ptr, %[[IDS:.*]]: !llvm.ptr, %[[W:.*]]: !llvm.ptr) -> i32
// The descriptor of logits: the pointer twice, offset 0, sizes [T, 8], strides [8, 1].
// CHECK: llvm.call @r__impl(%[[T]], %[[L]], %[[L]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[IDS]], %[[IDS]],
// CHECK: llvm.return %{{.*}} : i32
// CHECK: llvm.func private @r__impl(
// LLVMIR: define i32 @r(i64 %0, ptr %1, ptr %2, ptr %3)
// LLVMIR: define private void @r__impl(
// LLVMIR: call float @llvm.exp.f32
moe.router @r(%logits: tensor<?x8xf32>)
    -> (topk_ids: tensor<?x2xi32>, topk_weights: tensor<?x2xf32>)
    attributes {experts = 8, top_k = 2} {
  %p = moe.softmax %logits : tensor<?x8xf32>
  %ids, %w = moe.route %logits weights(%p : tensor<?x8xf32>) k = 2 renormalize
      : tensor<?x8xf32> -> tensor<?x2xi32>, tensor<?x2xf32>
  moe.yield %ids, %w : tensor<?x2xi32>, tensor<?x2xf32>
}
