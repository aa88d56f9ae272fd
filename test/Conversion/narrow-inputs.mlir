// moe-narrow-inputs (moe-compile --input-dtype logits=bf16): the lowered router's
// logits argument takes bf16 (or f16) and every load of it widens at the load
// (memref.load bf16 + arith.extf); nothing copies the logits into an f32 buffer. The
// bias input (not named) stays f32. An input returned as it is is copied element by
// element (load bf16, extf, store f32). (A whole-buffer use, memref.copy or a call,
// would be an error: only element loads can widen.)
// RUN: moe-opt %s --moe-form-stages --moe-lower-to-loops --moe-narrow-inputs="inputs=logits=bf16" | FileCheck %s
// RUN: moe-opt %s --moe-form-stages --moe-lower-to-loops="lane-parallel=true" --moe-narrow-inputs="inputs=logits=f16" | FileCheck %s --check-prefix=F16
// RUN: moe-opt %s --moe-form-stages --moe-lower-to-loops --moe-narrow-inputs="inputs=logits=f32" | FileCheck %s --check-prefix=F32
// RUN: not moe-opt %s --moe-form-stages --moe-lower-to-loops --moe-narrow-inputs="inputs=bias=bf16,logits=f8" 2>&1 | FileCheck %s --check-prefix=BADTYPE
// RUN: not moe-opt %s --moe-form-stages --moe-lower-to-loops --moe-narrow-inputs="inputs=nope=bf16" 2>&1 | FileCheck %s --check-prefix=NONAME
// RUN: not moe-opt %s --moe-form-stages --moe-lower-to-loops --moe-narrow-inputs="inputs=ids=bf16" 2>&1 | FileCheck %s --check-prefix=NOTFLOAT
// RUN: moe-opt %s --moe-form-stages --moe-lower-to-loops --moe-narrow-inputs="inputs=scores=bf16" | FileCheck %s --check-prefix=PASS

// CHECK-LABEL: func.func @r(
// CHECK-SAME: %{{[a-z0-9]+}}: index, %[[LOGITS:[a-z0-9]+]]: memref<?x16xbf16>, %[[BIAS:[a-z0-9]+]]: memref<16xf32>
// CHECK-SAME: moe.abi = #moe.abi<[{{.*}}#moe.param<name = "logits", role = in, kind = tensor, type = memref<?x16xbf16>, size = [1, 0, 1]>, #moe.param<name = "bias", role = in, kind = tensor, type = memref<16xf32>>
// CHECK-NOT: memref.copy %[[LOGITS]]
// CHECK-NOT: memref.alloc{{.*}}xbf16
// CHECK: %[[L:.*]] = memref.load %[[LOGITS]][%{{.*}}, %{{.*}}] : memref<?x16xbf16>
// CHECK-NEXT: %{{.*}} = arith.extf %[[L]] : bf16 to f32
// CHECK: memref.load %[[BIAS]][%{{.*}}] : memref<16xf32>
// Every use of the argument is a bf16 load followed by its extf.
// CHECK-NOT: memref.load %[[LOGITS]]{{.*}}xf32
// CHECK-NOT: memref.copy %[[LOGITS]]
// CHECK-LABEL: func.func @pass(

// F16-LABEL: func.func @r(
// F16-SAME: memref<?x16xf16>
// F16: scf.parallel
// F16: %[[L:.*]] = memref.load %{{.*}} : memref<?x16xf16>
// F16-NEXT: arith.extf %[[L]] : f16 to f32

// F32-LABEL: func.func @r(
// F32-SAME: memref<?x16xf32>
// F32-NOT: arith.extf

// BADTYPE: error: moe-narrow-inputs: 'logits=f8' is not NAME=bf16|f16|f32
// NONAME: error: moe-narrow-inputs: no router takes an input 'nope'
// NOTFLOAT: error: input 'ids' of @pass is not a float32 tensor (its type: 'memref<?x2xi32>')
// PASS-LABEL: func.func @pass(
// PASS-SAME: %[[S:[a-z0-9]+]]: memref<?x16xbf16>, %{{[a-z0-9]+}}: memref<?x2xi32>, %[[OUT:[a-z0-9]+]]: memref<?x16xf32>
// PASS-NOT: memref.copy
// PASS: %[[L:.*]] = memref.load %[[S]][%{{.*}}, %{{.*}}] : memref<?x16xbf16>
// PASS-NEXT: %[[W:.*]] = arith.extf %[[L]] : bf16 to f32
// PASS-NEXT: memref.store %[[W]], %[[OUT]]

moe.router @r(%logits: tensor<?x16xf32>, %bias: tensor<16xf32>)
    -> (topk_ids: tensor<?x2xi32>, topk_weights: tensor<?x2xf32>)
    attributes {experts = 16, top_k = 2} {
  %s = moe.sigmoid %logits : tensor<?x16xf32>
  %b = moe.add_bias %s, %bias : tensor<?x16xf32>, tensor<16xf32>
  %ids, %w = moe.route %b weights(%s : tensor<?x16xf32>) k = 2 renormalize
      : tensor<?x16xf32> -> tensor<?x2xi32>, tensor<?x2xf32>
  moe.yield %ids, %w : tensor<?x2xi32>, tensor<?x2xf32>
}

// An input returned as it is: the lowering copies it into the output buffer.
moe.router @pass(%scores: tensor<?x16xf32>, %ids: tensor<?x2xi32>)
    -> (scores_out: tensor<?x16xf32>, ids_out: tensor<?x2xi32>)
    attributes {experts = 16, top_k = 2} {
  moe.yield %scores, %ids : tensor<?x16xf32>, tensor<?x2xi32>
}
