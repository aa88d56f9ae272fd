// moe-lower-to-loops on the batch family (BatchOps.cpp): folds over the tokens of the
// batch. A plain reduction is expert-parallel, each expert visiting the tokens in order
// (reproducible float sums); a reduction over each token's top-k, the per-request folds
// and the LYNX anchors are sequential token loops; union_topk flags each token's top-k0
// in a [T, E] temporary, then ORs the rows per expert. Covers moe.batch_reduce (max; sum
// and count over topk), moe.segment_reduce, moe.union_topk, moe.segment_fill,
// moe.bin_score and moe.confident_top1 (lower-row-masks.mlir has batch_reduce rows()).
// RUN: moe-opt %s --moe-form-stages --moe-lower-to-loops --canonicalize | FileCheck %s

// CHECK-LABEL: func.func @reduce_max(
// CHECK-SAME: %[[T:[a-z0-9]+]]: index, %[[P:[a-z0-9]+]]: memref<?x8xf32>, %[[OUT:[a-z0-9]+]]: memref<8xf32>)
// CHECK-DAG: %[[NEGINF:.*]] = arith.constant 0xFF800000 : f32
// CHECK-NOT: memref.alloc
// CHECK: scf.parallel (%[[E:.*]]) = (%c0) to (%c8) step (%c1) {
// CHECK:   %[[ACC:.*]] = scf.for %[[TOK:.*]] = %c0 to %[[T]] step %c1 iter_args(%[[A:.*]] = %[[NEGINF]]) -> (f32) {
// CHECK:     %[[V:.*]] = memref.load %[[P]][%[[TOK]], %[[E]]] : memref<?x8xf32>
// CHECK:     %[[M:.*]] = arith.maximumf %[[A]], %[[V]] : f32
// CHECK:     scf.yield %[[M]] : f32
// CHECK:   memref.store %[[ACC]], %[[OUT]][%[[E]]] : memref<8xf32>
// CHECK: return
moe.router @reduce_max(%p: tensor<?x8xf32>) -> (peak: tensor<8xf32>)
    attributes {experts = 8, top_k = 2} {
  %m = moe.batch_reduce max %p : tensor<?x8xf32> -> tensor<8xf32>
  moe.yield %m : tensor<8xf32>
}

// Over each token's top-2: the output is cleared, then one token after the other picks
// its 2 best (a sorted list of 2 in static temporaries) and adds 1 (count) or its score
// (sum) at each picked expert.
// CHECK-LABEL: func.func @reduce_topk(
// CHECK-SAME: %[[T:[a-z0-9]+]]: index, %[[P:[a-z0-9]+]]: memref<?x8xf32>, %[[HITS:[a-z0-9]+]]: memref<8xi32>, %[[MASS:[a-z0-9]+]]: memref<8xf32>)
// CHECK-DAG: %[[ONE:.*]] = arith.constant 1 : i32
// CHECK-DAG: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: scf.for %[[E:.*]] = %c0 to %c8 step %c1 {
// CHECK:   memref.store %c0_i32, %[[HITS]][%[[E]]] : memref<8xi32>
// CHECK: %[[LV:.*]] = memref.alloc() : memref<2xf32>
// CHECK: %[[LI:.*]] = memref.alloc() : memref<2xindex>
// CHECK: scf.for %[[TOK:.*]] = %c0 to %[[T]] step %c1 {
// CHECK:   scf.while
// CHECK:     memref.load %[[P]][%[[TOK]], %{{.*}}]
// CHECK:   scf.for %[[J:.*]] = %c0 to %c2 step %c1 {
// CHECK:     %[[ID:.*]] = arith.select %{{.*}}, %{{.*}}, %c-1_i32 : i32
// CHECK:     %[[AT:.*]] = arith.index_cast %[[ID]] : i32 to index
// CHECK:     %[[H:.*]] = memref.load %[[HITS]][%[[AT]]] : memref<8xi32>
// CHECK:     %[[H1:.*]] = arith.addi %[[H]], %[[ONE]] : i32
// CHECK:     memref.store %[[H1]], %[[HITS]][%[[AT]]] : memref<8xi32>
// CHECK: scf.for %[[E2:.*]] = %c0 to %c8 step %c1 {
// CHECK:   memref.store %[[ZERO]], %[[MASS]][%[[E2]]] : memref<8xf32>
// CHECK: scf.for %[[TOK2:.*]] = %c0 to %[[T]] step %c1 {
// CHECK:   scf.for %{{.*}} = %c0 to %c2 step %c1 {
// CHECK:     %[[V:.*]] = arith.select %{{.*}}, %{{.*}}, %[[ZERO]] : f32
// CHECK:     %[[AT2:.*]] = arith.index_cast %{{.*}} : i32 to index
// CHECK:     %[[S:.*]] = memref.load %[[MASS]][%[[AT2]]] : memref<8xf32>
// CHECK:     %[[S1:.*]] = arith.addf %[[S]], %[[V]] : f32
// CHECK:     memref.store %[[S1]], %[[MASS]][%[[AT2]]] : memref<8xf32>
// CHECK-NOT: scf.parallel
// CHECK: memref.dealloc %[[LV]]
// CHECK: return
moe.router @reduce_topk(%p: tensor<?x8xf32>) -> (hits: tensor<8xi32>, mass: tensor<8xf32>)
    attributes {experts = 8, top_k = 2} {
  %h = moe.batch_reduce count %p over topk = 2 : tensor<?x8xf32> -> tensor<8xi32>
  %m = moe.batch_reduce sum %p over topk = 2 : tensor<?x8xf32> -> tensor<8xf32>
  moe.yield %h, %m : tensor<8xi32>, tensor<8xf32>
}

// segment_reduce: each token's leader (the first token of its request, found scanning
// back to the nearest earlier token of the request) in a [T] i32 temporary; the output
// rows cleared, each token's row added into its leader's row, then copied back to the
// request's other tokens.
// CHECK-LABEL: func.func @segment(
// CHECK-SAME: %[[T:[a-z0-9]+]]: index, %[[P:[a-z0-9]+]]: memref<?x8xf32>, %[[REQ:[a-z0-9]+]]: memref<?xi32>, %[[OUT:[a-z0-9]+]]: memref<?x8xf32>)
// CHECK-DAG: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: %[[LEADERS:.*]] = memref.alloc(%[[T]]) : memref<?xi32>
// CHECK: scf.for %[[TOK:.*]] = %c0 to %[[T]] step %c1 {
// CHECK:   %[[ID:.*]] = memref.load %[[REQ]][%[[TOK]]] : memref<?xi32>
// CHECK:   %[[BACK:.*]]:2 = scf.while (%{{.*}} = %[[TOK]], %{{.*}} = %false) : (index, i1) -> (index, i1) {
// CHECK:     arith.cmpi ugt, %{{.*}}, %c0 : index
// CHECK:   } do {
// CHECK:     %[[U:.*]] = arith.subi %{{.*}}, %c1 : index
// CHECK:     %[[UID:.*]] = memref.load %[[REQ]][%[[U]]] : memref<?xi32>
// CHECK:     arith.cmpi eq, %[[UID]], %[[ID]] : i32
// CHECK:   %[[PREV:.*]] = arith.select %[[BACK]]#1, %[[BACK]]#0, %[[TOK]] : index
// CHECK:   %[[PL:.*]] = memref.load %[[LEADERS]][%[[PREV]]] : memref<?xi32>
// CHECK:   %[[SELF:.*]] = arith.index_cast %[[TOK]] : index to i32
// CHECK:   %[[LEAD:.*]] = arith.select %[[BACK]]#1, %[[PL]], %[[SELF]] : i32
// CHECK:   memref.store %[[LEAD]], %[[LEADERS]][%[[TOK]]] : memref<?xi32>
// CHECK: scf.for %{{.*}} = %c0 to %[[T]] step %c1 {
// CHECK:   scf.for %{{.*}} = %c0 to %c8 step %c1 {
// CHECK:     memref.store %[[ZERO]], %[[OUT]]
// CHECK: scf.for %[[TOK2:.*]] = %c0 to %[[T]] step %c1 {
// CHECK:   %[[L:.*]] = memref.load %[[LEADERS]][%[[TOK2]]] : memref<?xi32>
// CHECK:   %[[LI:.*]] = arith.index_cast %[[L]] : i32 to index
// CHECK:   scf.for %[[E:.*]] = %c0 to %c8 step %c1 {
// CHECK:     %[[ACC:.*]] = memref.load %[[OUT]][%[[LI]], %[[E]]] : memref<?x8xf32>
// CHECK:     %[[V:.*]] = memref.load %[[P]][%[[TOK2]], %[[E]]] : memref<?x8xf32>
// CHECK:     %[[SUM:.*]] = arith.addf %[[ACC]], %[[V]] : f32
// CHECK:     memref.store %[[SUM]], %[[OUT]][%[[LI]], %[[E]]] : memref<?x8xf32>
// CHECK: scf.for %[[TOK3:.*]] = %c0 to %[[T]] step %c1 {
// CHECK:   %[[LI3:.*]] = arith.index_cast %{{.*}} : i32 to index
// CHECK:   %[[FOLLOWER:.*]] = arith.cmpi ne, %[[LI3]], %[[TOK3]] : index
// CHECK:   scf.if %[[FOLLOWER]] {
// CHECK:     scf.for %[[E3:.*]] = %c0 to %c8 step %c1 {
// CHECK:       %[[C:.*]] = memref.load %[[OUT]][%[[LI3]], %[[E3]]] : memref<?x8xf32>
// CHECK:       memref.store %[[C]], %[[OUT]][%[[TOK3]], %[[E3]]] : memref<?x8xf32>
// CHECK: memref.dealloc %[[LEADERS]] : memref<?xi32>
moe.router @segment(%p: tensor<?x8xf32>, %request_ids: tensor<?xi32>)
    -> (per_request: tensor<?x8xf32>) attributes {experts = 8, top_k = 2} {
  %r = moe.segment_reduce sum %p by %request_ids : tensor<?x8xf32>, tensor<?xi32>
  moe.yield %r : tensor<?x8xf32>
}

// union_topk (k0 = 1): token-parallel flags of each token's top-1 in a [T, 8] i8
// temporary (the top-k buffers sized by the constant k0), then expert-parallel ORs.
// CHECK-LABEL: func.func @union_topk(
// CHECK-SAME: %[[T:[a-z0-9]+]]: index, %[[P:[a-z0-9]+]]: memref<?x8xf32>, %[[SET:[a-z0-9]+]]: memref<8xi8>)
// CHECK: %[[FLAGS:.*]] = memref.alloc(%[[T]]) : memref<?x8xi8>
// CHECK: memref.alloc(%[[T]]) : memref<?x1xf32>
// CHECK: %[[LI:.*]] = memref.alloc(%[[T]]) : memref<?x1xindex>
// CHECK: scf.parallel (%[[TOK:.*]]) = (%c0) to (%[[T]]) step (%c1) {
// CHECK:   %[[ROW:.*]] = memref.subview %[[FLAGS]][%[[TOK]], 0] [1, 8] [1, 1]
// CHECK:   scf.for %[[E:.*]] = %c0 to %c8 step %c1 {
// CHECK:     memref.store %c0_i8, %[[ROW]][%[[E]]]
// CHECK:   %[[ROWI:.*]] = memref.subview %[[LI]][%[[TOK]], 0] [1, 1] [1, 1]
// CHECK:   %[[N:.*]]:2 = scf.while
// CHECK:   %[[ANY:.*]] = arith.cmpi ugt, %[[N]]#1, %c0 : index
// CHECK:   scf.if %[[ANY]] {
// CHECK:     %[[WIN:.*]] = memref.load %[[ROWI]][%c0]
// CHECK:     memref.store %c1_i8, %[[ROW]][%[[WIN]]]
// CHECK: scf.parallel (%[[E2:.*]]) = (%c0) to (%c8) step (%c1) {
// CHECK:   %[[OR:.*]] = scf.for %[[TOK2:.*]] = %c0 to %[[T]] step %c1 iter_args(%[[A:.*]] = %c0_i8) -> (i8) {
// CHECK:     %[[F:.*]] = memref.load %[[FLAGS]][%[[TOK2]], %[[E2]]] : memref<?x8xi8>
// CHECK:     arith.ori %[[A]], %[[F]] : i8
// CHECK:   memref.store %[[OR]], %[[SET]][%[[E2]]] : memref<8xi8>
// CHECK: memref.dealloc %[[FLAGS]]
moe.router @union_topk(%p: tensor<?x8xf32>) -> (warm: !moe.set<8>)
    attributes {experts = 8, top_k = 2} {
  %k0 = arith.constant 1 : i64
  %s = moe.union_topk %p, %k0 : tensor<?x8xf32> -> !moe.set<8>
  moe.yield %s : !moe.set<8>
}

// segment_fill (XShare Alg. 3): the request leaders, then for each leader r its set in
// a cleared [8] row - its tokens' top-1 (k0) and the summed scores of its tokens (from
// r on, the tokens led by r) - plus the 2 best outside it by those sums; each request's
// row ORed into the output.
// CHECK-LABEL: func.func @segment_fill(
// CHECK-SAME: %[[T:[a-z0-9]+]]: index, %[[P:[a-z0-9]+]]: memref<?x8xf32>, %[[REQ:[a-z0-9]+]]: memref<?xi32>, %[[SET:[a-z0-9]+]]: memref<8xi8>)
// CHECK: %[[LEADERS:.*]] = memref.alloc(%[[T]]) : memref<?xi32>
// CHECK: scf.for %{{.*}} = %c0 to %[[T]] step %c1 {
// CHECK:   scf.while
// CHECK:   memref.store %{{.*}}, %[[LEADERS]]
// CHECK: scf.for %{{.*}} = %c0 to %c8 step %c1 {
// CHECK:   memref.store %c0_i8, %[[SET]]
// CHECK: %[[ROW:.*]] = memref.alloc() : memref<8xi8>
// CHECK: %[[AGG:.*]] = memref.alloc() : memref<8xf32>
// CHECK: scf.for %[[R:.*]] = %c0 to %[[T]] step %c1 {
// CHECK:   %[[RI:.*]] = arith.index_cast %[[R]] : index to i32
// CHECK:   %[[RL:.*]] = memref.load %[[LEADERS]][%[[R]]] : memref<?xi32>
// CHECK:   %[[ISLEADER:.*]] = arith.cmpi eq, %[[RL]], %[[RI]] : i32
// CHECK:   scf.if %[[ISLEADER]] {
// CHECK:     scf.for %[[TOK:.*]] = %[[R]] to %[[T]] step %c1 {
// CHECK:       %[[TL:.*]] = memref.load %[[LEADERS]][%[[TOK]]] : memref<?xi32>
// CHECK:       %[[MINE:.*]] = arith.cmpi eq, %[[TL]], %{{.*}} : i32
// CHECK:       scf.if %[[MINE]] {
// CHECK:         memref.store %c1_i8, %[[ROW]]
// CHECK:         scf.for %[[E:.*]] = %c0 to %c8 step %c1 {
// CHECK:           %[[X:.*]] = memref.load %[[P]][%[[TOK]], %[[E]]]
// CHECK:           %[[A:.*]] = memref.load %[[AGG]][%[[E]]]
// CHECK:           %[[A1:.*]] = arith.addf %[[A]], %[[X]] : f32
// CHECK:           memref.store %[[A1]], %[[AGG]][%[[E]]]
// The budget (2) of best experts by the request's mass, outside its warm-up.
// CHECK:     scf.while
// CHECK:       arith.cmpi ult, %{{.*}}, %c2 : index
// CHECK:     scf.for %{{.*}} = %c0 to %c2 step %c1 {
// CHECK:       memref.store %c1_i8, %[[ROW]]
// CHECK:     scf.for %[[E2:.*]] = %c0 to %c8 step %c1 {
// CHECK:       %[[F:.*]] = memref.load %[[ROW]][%[[E2]]]
// CHECK:       %[[S:.*]] = memref.load %[[SET]][%[[E2]]]
// CHECK:       %[[OR:.*]] = arith.ori %[[S]], %[[F]] : i8
// CHECK:       memref.store %[[OR]], %[[SET]][%[[E2]]]
// CHECK: memref.dealloc %[[LEADERS]]
moe.router @segment_fill(%p: tensor<?x8xf32>, %request_ids: tensor<?xi32>)
    -> (selected: !moe.set<8>) attributes {experts = 8, top_k = 2} {
  %k0 = arith.constant 1 : i64
  %m = arith.constant 2 : i64
  %s = moe.segment_fill %p by %request_ids warmup(%k0) budget(%m)
      : tensor<?x8xf32>, tensor<?xi32> -> !moe.set<8>
  moe.yield %s : !moe.set<8>
}

// LYNX: bin_score is expert-parallel - expert e adds T^bin[t, e] for each token (in
// order) that routed to it; confident_top1 is a token loop marking a token's top-1 when
// its second choice is in bin -1 or below (both ids valid).
// CHECK-LABEL: func.func @lynx(
// CHECK-SAME: %[[T:[a-z0-9]+]]: index, %[[BINS:[a-z0-9]+]]: memref<?x8xi32>, %[[IDS:[a-z0-9]+]]: memref<?x2xi32>,
// CHECK-SAME: %[[ANCHORS:[a-z0-9]+]]: memref<8xi8>, %[[SCORE:[a-z0-9]+]]: memref<8xf32>)
// CHECK-DAG: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: %[[TI:.*]] = arith.index_cast %[[T]] : index to i64
// CHECK: %[[BASE:.*]] = arith.sitofp %[[TI]] : i64 to f32
// CHECK: scf.parallel (%[[E:.*]]) = (%c0) to (%c8) step (%c1) {
// CHECK:   memref.store %[[ZERO]], %[[SCORE]][%[[E]]] : memref<8xf32>
// CHECK:   %[[EI:.*]] = arith.index_cast %[[E]] : index to i32
// CHECK:   scf.for %[[TOK:.*]] = %c0 to %[[T]] step %c1 {
// CHECK:     %[[VOTED:.*]] = scf.for %[[J:.*]] = %c0 to %c2 step %c1 iter_args(%{{.*}} = %false) -> (i1) {
// CHECK:       %[[ID:.*]] = memref.load %[[IDS]][%[[TOK]], %[[J]]] : memref<?x2xi32>
// CHECK:       arith.cmpi eq, %[[ID]], %[[EI]] : i32
// CHECK:     scf.if %[[VOTED]] {
// CHECK:       %[[BIN:.*]] = memref.load %[[BINS]][%[[TOK]], %[[E]]] : memref<?x8xi32>
// CHECK:       %[[BF:.*]] = arith.sitofp %[[BIN]] : i32 to f32
// CHECK:       %[[W:.*]] = math.powf %[[BASE]], %[[BF]] : f32
// CHECK:       %[[OLD:.*]] = memref.load %[[SCORE]][%[[E]]] : memref<8xf32>
// CHECK:       %[[NEW:.*]] = arith.addf %[[OLD]], %[[W]] : f32
// CHECK:       memref.store %[[NEW]], %[[SCORE]][%[[E]]] : memref<8xf32>
// CHECK: scf.for %{{.*}} = %c0 to %c8 step %c1 {
// CHECK:   memref.store %c0_i8, %[[ANCHORS]]
// CHECK: scf.for %[[TOK2:.*]] = %c0 to %[[T]] step %c1 {
// CHECK:   %[[SECOND:.*]] = memref.load %[[IDS]][%[[TOK2]], %c1] : memref<?x2xi32>
// CHECK:   %[[FIRST:.*]] = memref.load %[[IDS]][%[[TOK2]], %c0] : memref<?x2xi32>
// CHECK:   scf.if %{{.*}} {
// CHECK:     %[[SI:.*]] = arith.index_cast %[[SECOND]] : i32 to index
// CHECK:     %[[SB:.*]] = memref.load %[[BINS]][%[[TOK2]], %[[SI]]] : memref<?x8xi32>
// CHECK:     %[[FAR:.*]] = arith.cmpi sle, %[[SB]], %c-1_i32 : i32
// CHECK:     scf.if %[[FAR]] {
// CHECK:       %[[FI:.*]] = arith.index_cast %[[FIRST]] : i32 to index
// CHECK:       memref.store %c1_i8, %[[ANCHORS]][%[[FI]]] : memref<8xi8>
moe.router @lynx(%bins: tensor<?x8xi32>, %ids: tensor<?x2xi32>)
    -> (anchors: !moe.set<8>, score: tensor<8xf32>) attributes {experts = 8, top_k = 2} {
  %score = moe.bin_score %bins, %ids : tensor<?x8xi32>, tensor<?x2xi32> -> tensor<8xf32>
  %anchors = moe.confident_top1 %bins, %ids : tensor<?x8xi32>, tensor<?x2xi32> -> !moe.set<8>
  moe.yield %anchors, %score : !moe.set<8>, tensor<8xf32>
}
