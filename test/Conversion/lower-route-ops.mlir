// moe-lower-to-loops on the route family (RouteOps.cpp; moe.capacity and
// moe.expert_choice from CapacityOps.cpp): a route and a remap are per-token rows in
// one scf.parallel over the tokens, writing the [T, k] outputs in place; the batch
// outputs (counts, compaction, block alignment, METRO's replica choice, capacity
// admission) are loop nests after it. Covers moe.route (top_p / min_k, max_rank,
// softmax_weights, scaling; lower-to-loops.mlir and lower-row-masks.mlir have within,
// weights, renormalize and rows), moe.remap_physical, moe.metro_replicas,
// moe.expert_counts, moe.compact_active, moe.align_blocks (the host form; the
// lane-parallel one is in lower-to-loops.mlir), moe.fill_empty_slots, moe.capacity and
// moe.expert_choice.
// RUN: moe-opt %s --moe-form-stages --moe-lower-to-loops --canonicalize | FileCheck %s

// A route's eligible experts: score neither NaN nor -inf; the sorted top-2 list, then
// each slot's weight from `weights` at the picked id (slot 0's id when none); top-p
// keeps slot j when j < min_k or the kept weights before it are below p; renormalize
// divides by a positive sum; scaling = 2.5 multiplies last.
// CHECK-LABEL: func.func @route_top_p(
// CHECK-SAME: %[[T:[a-z0-9]+]]: index, %[[S:[a-z0-9]+]]: memref<?x8xf32>, %[[P:[a-z0-9]+]]: memref<?x8xf32>,
// CHECK-SAME: %[[IDS:[a-z0-9]+]]: memref<?x2xi32>, %[[W:[a-z0-9]+]]: memref<?x2xf32>, %[[TOPP:[a-z0-9]+]]: f32, %[[MINK:[a-z0-9]+]]: i64)
// CHECK-DAG: %[[SCALING:.*]] = arith.constant 2.500000e+00 : f32
// CHECK-DAG: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-DAG: %[[NEGINF:.*]] = arith.constant 0xFF800000 : f32
// CHECK: scf.parallel (%[[TOK:.*]]) = (%c0) to (%[[T]]) step (%c1) {
// CHECK:   scf.while
// CHECK:     %[[V:.*]] = memref.load %[[S]][%[[TOK]], %{{.*}}] : memref<?x8xf32>
// CHECK:     %[[NOTINF:.*]] = arith.cmpf one, %[[V]], %[[NEGINF]] : f32
// CHECK:     %[[NAN:.*]] = arith.cmpf uno, %[[V]], %[[V]] : f32
// CHECK:     %[[NUM:.*]] = arith.xori %[[NAN]], %true : i1
// CHECK:     arith.andi %[[NUM]], %[[NOTINF]] : i1
// CHECK:   scf.for %[[J:.*]] = %c0 to %c2 step %c1 {
// CHECK:     %[[ID:.*]] = arith.select %{{.*}}, %{{.*}}, %c-1_i32 : i32
// CHECK:     %[[FOUND:.*]] = arith.cmpi sge, %[[ID]], %c0_i32 : i32
// CHECK:     %[[SAFE:.*]] = arith.select %[[FOUND]], %[[ID]], %c0_i32 : i32
// CHECK:     %[[AT:.*]] = arith.index_cast %[[SAFE]] : i32 to index
// CHECK:     %[[PW:.*]] = memref.load %[[P]][%[[TOK]], %[[AT]]] : memref<?x8xf32>
// CHECK:     memref.store %[[ID]], %[[IDS]][%[[TOK]], %[[J]]] : memref<?x2xi32>
// CHECK:     %[[WV:.*]] = arith.select %[[FOUND]], %[[PW]], %[[ZERO]] : f32
// CHECK:     memref.store %[[WV]], %[[W]][%[[TOK]], %[[J]]] : memref<?x2xf32>
// Top-p over the slots, best first.
// CHECK:   %[[MK:.*]] = arith.index_cast %[[MINK]] : i64 to index
// CHECK:   scf.for %[[J2:.*]] = %c0 to %c2 step %c1 iter_args(%[[KEPT:.*]] = %[[ZERO]]) -> (f32) {
// CHECK:     %[[BELOW:.*]] = arith.cmpf olt, %[[KEPT]], %[[TOPP]] : f32
// CHECK:     %[[EARLY:.*]] = arith.cmpi ult, %[[J2]], %[[MK]] : index
// CHECK:     %[[KEEP:.*]] = arith.ori %[[EARLY]], %[[BELOW]] : i1
// CHECK:     %[[KW:.*]] = arith.select %[[KEEP]], %{{.*}}, %[[ZERO]] : f32
// CHECK:     %[[KI:.*]] = arith.select %[[KEEP]], %{{.*}}, %c-1_i32 : i32
// CHECK:     memref.store %[[KI]], %[[IDS]][%[[TOK]], %[[J2]]]
// CHECK:     memref.store %[[KW]], %[[W]][%[[TOK]], %[[J2]]]
// CHECK:     arith.addf %[[KEPT]], %[[KW]] : f32
// Renormalization.
// CHECK:   %[[SUM:.*]] = scf.for %{{.*}} = %c0 to %c2 step %c1 iter_args(%{{.*}} = %[[ZERO]]) -> (f32) {
// CHECK:   %[[POS:.*]] = arith.cmpf ogt, %[[SUM]], %[[ZERO]] : f32
// CHECK:   scf.for %[[J3:.*]] = %c0 to %c2 step %c1 {
// CHECK:     %[[X:.*]] = memref.load %[[W]][%[[TOK]], %[[J3]]]
// CHECK:     %[[Q:.*]] = arith.divf %[[X]], %[[SUM]] : f32
// CHECK:     %[[N:.*]] = arith.select %[[POS]], %[[Q]], %[[X]] : f32
// CHECK:     memref.store %[[N]], %[[W]][%[[TOK]], %[[J3]]]
// CHECK:   scf.for %[[J4:.*]] = %c0 to %c2 step %c1 {
// CHECK:     %[[Y:.*]] = memref.load %[[W]][%[[TOK]], %[[J4]]]
// CHECK:     %[[SC:.*]] = arith.mulf %[[Y]], %[[SCALING]] : f32
// CHECK:     memref.store %[[SC]], %[[W]][%[[TOK]], %[[J4]]]
moe.router @route_top_p(%logits: tensor<?x8xf32>, %p: tensor<?x8xf32>)
    -> (topk_ids: tensor<?x2xi32>, topk_weights: tensor<?x2xf32>)
    attributes {experts = 8, top_k = 2} {
  %tp = moe.knob "top_p" = 0.9 : f32
  %mk = moe.knob "min_k" = 1 : i64
  %ids, %w = moe.route %logits weights(%p : tensor<?x8xf32>) k = 2 renormalize scaling = 2.5
      top_p(%tp : f32) min_k(%mk : i64)
      : tensor<?x8xf32> -> tensor<?x2xi32>, tensor<?x2xf32>
  moe.yield %ids, %w : tensor<?x2xi32>, tensor<?x2xf32>
}

// OEA's max_rank: r <= 0 means k; a slot keeps its expert when fewer than r experts
// of all 8 outrank it (a greater score, or an equal one at a lower id).
// CHECK-LABEL: func.func @route_max_rank(
// CHECK-SAME: %[[S:[a-z0-9]+]]: memref<?x8xf32>, %[[SEL:[a-z0-9]+]]: memref<8xi8>, %[[IDS:[a-z0-9]+]]: memref<?x2xi32>,
// CHECK-SAME: %[[W:[a-z0-9]+]]: memref<?x2xf32>, %[[R:[a-z0-9]+]]: i64)
// CHECK: scf.parallel (%[[TOK:.*]]) = (%c0) to (%{{.*}}) step (%c1) {
// The set restricts the candidates.
// CHECK:   scf.while
// CHECK:     memref.load %[[SEL]][%{{.*}}] : memref<8xi8>
// CHECK:   %[[NONPOS:.*]] = arith.cmpi sle, %[[R]], %c0_i64 : i64
// CHECK:   %[[BOUND:.*]] = arith.select %[[NONPOS]], %c2_i64, %[[R]] : i64
// CHECK:   scf.for %[[J:.*]] = %c0 to %c2 step %c1 {
// CHECK:     %[[ID:.*]] = memref.load %[[IDS]][%[[TOK]], %[[J]]] : memref<?x2xi32>
// CHECK:     %[[FOUND:.*]] = arith.cmpi sge, %[[ID]], %c0_i32 : i32
// CHECK:     %[[MINE:.*]] = arith.index_cast %{{.*}} : i32 to index
// CHECK:     %[[V:.*]] = memref.load %[[S]][%[[TOK]], %[[MINE]]]
// CHECK:     %[[ABOVE:.*]] = scf.for %[[E:.*]] = %c0 to %c8 step %c1 iter_args(%[[N:.*]] = %c0_i64) -> (i64) {
// CHECK:       %[[O:.*]] = memref.load %[[S]][%[[TOK]], %[[E]]]
// CHECK:       %[[LOWER:.*]] = arith.cmpi ult, %[[E]], %[[MINE]] : index
// CHECK:       %[[EQ:.*]] = arith.cmpf oeq, %[[O]], %[[V]] : f32
// CHECK:       %[[TIE:.*]] = arith.andi %[[EQ]], %[[LOWER]] : i1
// CHECK:       %[[GT:.*]] = arith.cmpf ogt, %[[O]], %[[V]] : f32
// CHECK:       %[[BETTER:.*]] = arith.ori %[[GT]], %[[TIE]] : i1
// CHECK:       %[[ONE:.*]] = arith.extui %[[BETTER]] : i1 to i64
// CHECK:       arith.addi %[[N]], %[[ONE]] : i64
// CHECK:     %[[RANKED:.*]] = arith.cmpi slt, %[[ABOVE]], %[[BOUND]] : i64
// CHECK:     %[[KEEP:.*]] = arith.andi %[[FOUND]], %[[RANKED]] : i1
// CHECK:     %[[KI:.*]] = arith.select %[[KEEP]], %[[ID]], %c-1_i32 : i32
// CHECK:     memref.store %[[KI]], %[[IDS]][%[[TOK]], %[[J]]]
// CHECK:     memref.store %{{.*}}, %[[W]][%[[TOK]], %[[J]]]
moe.router @route_max_rank(%logits: tensor<?x8xf32>, %sel: !moe.set<8>)
    -> (topk_ids: tensor<?x2xi32>, topk_weights: tensor<?x2xf32>)
    attributes {experts = 8, top_k = 2} {
  %r = moe.knob "max_rank" = 0 : i64
  %ids, %w = moe.route %logits within %sel k = 2 max_rank(%r : i64)
      : tensor<?x8xf32>, !moe.set<8> -> tensor<?x2xi32>, tensor<?x2xf32>
  moe.yield %ids, %w : tensor<?x2xi32>, tensor<?x2xf32>
}

// softmax_weights: each slot weighs exp(score - best selected score), NaN for the whole
// row when any score is NaN or +inf (an i32 max of flags), 0 for an empty slot.
// CHECK-LABEL: func.func @route_softmax_weights(
// CHECK-SAME: %[[S:[a-z0-9]+]]: memref<?x8xf32>, %[[IDS:[a-z0-9]+]]: memref<?x2xi32>, %[[W:[a-z0-9]+]]: memref<?x2xf32>)
// CHECK-DAG: %[[QNAN:.*]] = arith.constant 0x7FC00000 : f32
// CHECK-DAG: %[[INF:.*]] = arith.constant 0x7F800000 : f32
// CHECK-DAG: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: scf.parallel (%[[TOK:.*]]) = (%c0) to (%{{.*}}) step (%c1) {
// CHECK:   %[[BEST:.*]] = memref.load %[[W]][%[[TOK]], %c0] : memref<?x2xf32>
// CHECK:   %[[ANY:.*]] = scf.for %{{.*}} = %c0 to %c8 step %c1 iter_args(%[[A:.*]] = %c0_i32) -> (i32) {
// CHECK:     arith.cmpf oeq, %{{.*}}, %[[INF]] : f32
// CHECK:     arith.maxui %[[A]], %{{.*}} : i32
// CHECK:   %[[POISONED:.*]] = arith.cmpi ne, %[[ANY]], %c0_i32 : i32
// CHECK:   %[[SUM:.*]] = scf.for %[[J:.*]] = %c0 to %c2 step %c1 iter_args(%[[ACC:.*]] = %[[ZERO]]) -> (f32) {
// CHECK:     %[[V:.*]] = memref.load %[[W]][%[[TOK]], %[[J]]]
// CHECK:     %[[ID:.*]] = memref.load %[[IDS]][%[[TOK]], %[[J]]]
// CHECK:     %[[FOUND:.*]] = arith.cmpi sge, %[[ID]], %c0_i32 : i32
// CHECK:     %[[D:.*]] = arith.subf %[[V]], %[[BEST]] : f32
// CHECK:     %[[E:.*]] = math.exp %[[D]] : f32
// CHECK:     %[[PE:.*]] = arith.select %[[POISONED]], %[[QNAN]], %[[E]] : f32
// CHECK:     %[[X:.*]] = arith.select %[[FOUND]], %[[PE]], %[[ZERO]] : f32
// CHECK:     memref.store %[[X]], %[[W]][%[[TOK]], %[[J]]]
// CHECK:     arith.addf %[[ACC]], %[[X]] : f32
// CHECK:   arith.cmpf ogt, %[[SUM]], %[[ZERO]] : f32
// CHECK:   arith.divf %{{.*}}, %[[SUM]] : f32
moe.router @route_softmax_weights(%logits: tensor<?x8xf32>)
    -> (topk_ids: tensor<?x2xi32>, topk_weights: tensor<?x2xf32>)
    attributes {experts = 8, top_k = 2} {
  %ids, %w = moe.route %logits k = 2 renormalize softmax_weights
      : tensor<?x8xf32> -> tensor<?x2xi32>, tensor<?x2xf32>
  moe.yield %ids, %w : tensor<?x2xi32>, tensor<?x2xf32>
}

// remap_physical: the placement is two parameters (replica counts, log2phy [8, 5]);
// token t takes replica t mod max(count, 1) of each valid id; -1 stays -1.
// CHECK-LABEL: func.func @remap(
// CHECK-SAME: %[[IDS:[a-z0-9]+]]: memref<?x2xi32>, %[[COUNT:[a-z0-9]+]]: memref<8xi32>, %[[L2P:[a-z0-9]+]]: memref<8x5xi32>, %[[OUT:[a-z0-9]+]]: memref<?x2xi32>)
// CHECK-SAME: #moe.param<name = "placement.replica_count", role = in, kind = placement_replicas, type = memref<8xi32>>
// CHECK-SAME: #moe.param<name = "placement.log2phy", role = in, kind = placement_log2phy, type = memref<8x5xi32>>
// CHECK: scf.parallel (%[[TOK:.*]]) = (%c0) to (%{{.*}}) step (%c1) {
// CHECK:   %[[TI:.*]] = arith.index_cast %[[TOK]] : index to i32
// CHECK:   scf.for %[[J:.*]] = %c0 to %c2 step %c1 {
// CHECK:     %[[E:.*]] = memref.load %[[IDS]][%[[TOK]], %[[J]]] : memref<?x2xi32>
// CHECK:     %[[VALID:.*]] = arith.andi %{{.*}}, %{{.*}} : i1
// CHECK:     %[[ES:.*]] = arith.select %[[VALID]], %[[E]], %c0_i32 : i32
// CHECK:     %[[EI:.*]] = arith.index_cast %[[ES]] : i32 to index
// CHECK:     %[[C:.*]] = memref.load %[[COUNT]][%[[EI]]] : memref<8xi32>
// CHECK:     %[[LOW:.*]] = arith.cmpi slt, %[[C]], %c1_i32 : i32
// CHECK:     %[[C1:.*]] = arith.select %[[LOW]], %c1_i32, %[[C]] : i32
// CHECK:     %[[REP:.*]] = arith.remui %[[TI]], %[[C1]] : i32
// CHECK:     %[[RI:.*]] = arith.index_cast %[[REP]] : i32 to index
// CHECK:     %[[PHYS:.*]] = memref.load %[[L2P]][%[[EI]], %[[RI]]] : memref<8x5xi32>
// CHECK:     %[[R:.*]] = arith.select %[[VALID]], %[[PHYS]], %c-1_i32 : i32
// CHECK:     memref.store %[[R]], %[[OUT]][%[[TOK]], %[[J]]] : memref<?x2xi32>
moe.router @remap(%ids: tensor<?x2xi32>,
                  %placement: !moe.placement<experts = 8, devices = 2, slots = 12>)
    -> (physical_ids: tensor<?x2xi32>) attributes {experts = 8, top_k = 2} {
  %phys = moe.remap_physical %ids, %placement
      : tensor<?x2xi32>, !moe.placement<experts = 8, devices = 2, slots = 12>
  moe.yield %phys : tensor<?x2xi32>
}

// metro_replicas, sequential: -2 marks an activated expert not placed yet; 8 rounds,
// each taking the open expert with the fewest replicas (clamped to [1, 5]), then the
// most tokens, and placing it on the replica whose GPU (slot / 6) has the fewest
// activated experts, then the fewest tokens (an i64 [2] temporary); the remap then
// prefers the chosen slot.
// CHECK-LABEL: func.func @metro(
// CHECK-SAME: %[[IDS:[a-z0-9]+]]: memref<?x2xi32>, %[[COUNTS:[a-z0-9]+]]: memref<8xi32>, %[[COUNT:[a-z0-9]+]]: memref<8xi32>, %[[L2P:[a-z0-9]+]]: memref<8x5xi32>,
// CHECK-SAME: %[[OUT:[a-z0-9]+]]: memref<?x2xi32>, %[[PERGPU:[a-z0-9]+]]: memref<2xi32>)
// CHECK: %[[CHOSEN:.*]] = memref.alloc() : memref<8xi32>
// CHECK: %[[TOKENS:.*]] = memref.alloc() : memref<2xi64>
// CHECK: scf.for %[[I:.*]] = %c0 to %c8 step %c1 {
// CHECK:   %[[ACTIVE:.*]] = arith.cmpi sgt, %{{.*}}, %c0_i32 : i32
// CHECK:   %[[MARK:.*]] = arith.select %[[ACTIVE]], %c-2_i32, %c-1_i32 : i32
// CHECK:   memref.store %[[MARK]], %[[CHOSEN]][%[[I]]]
// CHECK:   memref.store %c0_i32, %[[PERGPU]][%[[I]]]
// CHECK:   memref.store %c0_i64, %[[TOKENS]][%[[I]]]
// CHECK: scf.for %{{.*}} = %c0 to %c8 step %c1 {
// CHECK:   %[[NEXT:.*]]:3 = scf.for %[[E:.*]] = %c0 to %c8 step %c1 iter_args({{.*}}) -> (i32, i32, i32) {
// CHECK:     %[[RC:.*]] = memref.load %[[COUNT]][%[[E]]]
// CHECK:     arith.cmpi sgt, %{{.*}}, %c5_i32 : i32
// CHECK:     %[[STATE:.*]] = memref.load %[[CHOSEN]][%[[E]]]
// CHECK:     arith.cmpi eq, %[[STATE]], %c-2_i32 : i32
// CHECK:   %[[ANY:.*]] = arith.cmpi sge, %[[NEXT]]#0, %c0_i32 : i32
// CHECK:   scf.if %[[ANY]] {
// CHECK:     %[[EX:.*]] = arith.index_cast %[[NEXT]]#0 : i32 to index
// CHECK:     %[[NREP:.*]] = arith.index_cast %[[NEXT]]#1 : i32 to index
// CHECK:     %[[BEST:.*]]:3 = scf.for %{{.*}} = %c0 to %[[NREP]] step %c1 iter_args({{.*}}) -> (i32, i32, i64) {
// CHECK:       memref.load %[[L2P]][%[[EX]], %{{.*}}]
// CHECK:       arith.divsi %{{.*}}, %c6_i32 : i32
// CHECK:     %[[SLOT:.*]] = memref.load %[[L2P]][%[[EX]], %{{.*}}] : memref<8x5xi32>
// CHECK:     memref.store %[[SLOT]], %[[CHOSEN]][%[[EX]]]
// CHECK:     %[[G:.*]] = memref.load %[[PERGPU]]
// CHECK:     arith.addi %[[G]], %c1_i32 : i32
// CHECK:     arith.extsi %[[NEXT]]#2 : i32 to i64
// The remap: the chosen slot when there is one, the round robin otherwise.
// CHECK: scf.parallel (%[[TOK:.*]]) = (%c0) to (%{{.*}}) step (%c1) {
// CHECK:   %[[RR:.*]] = memref.load %[[L2P]]
// CHECK:   %[[MINE:.*]] = memref.load %[[CHOSEN]]
// CHECK:   %[[HAS:.*]] = arith.cmpi sge, %[[MINE]], %c0_i32 : i32
// CHECK:   arith.select %[[HAS]], %[[MINE]], %[[RR]] : i32
// CHECK:   memref.store %{{.*}}, %[[OUT]][%[[TOK]], %{{.*}}]
// CHECK: memref.dealloc %[[CHOSEN]]
moe.router @metro(%ids: tensor<?x2xi32>, %counts: tensor<8xi32>,
                  %placement: !moe.placement<experts = 8, devices = 2, slots = 12>)
    -> (physical_ids: tensor<?x2xi32>, per_gpu: tensor<2xi32>)
    attributes {experts = 8, top_k = 2} {
  %slots, %per_gpu = moe.metro_replicas %counts on %placement
      : tensor<8xi32>, !moe.placement<experts = 8, devices = 2, slots = 12>
      -> tensor<8xi32>, tensor<2xi32>
  %phys = moe.remap_physical %ids, %placement replicas(%slots : tensor<8xi32>)
      : tensor<?x2xi32>, !moe.placement<experts = 8, devices = 2, slots = 12>
  moe.yield %phys, %per_gpu : tensor<?x2xi32>, tensor<2xi32>
}

// expert_counts on the host: cleared, then token-parallel atomic increments of the
// valid ids (integer counts do not depend on the order); compact_active: the experts
// with tokens in id order, -1 after them, and their number.
// CHECK-LABEL: func.func @counts(
// CHECK-SAME: %[[T:[a-z0-9]+]]: index, %[[IDS:[a-z0-9]+]]: memref<?x2xi32>, %[[COUNTS:[a-z0-9]+]]: memref<8xi32>,
// CHECK-SAME: %[[ACTIVE:[a-z0-9]+]]: memref<8xi32>, %[[NUM:[a-z0-9]+]]: memref<1xi32>)
// CHECK: scf.for %[[E:.*]] = %c0 to %c8 step %c1 {
// CHECK:   memref.store %c0_i32, %[[COUNTS]][%[[E]]] : memref<8xi32>
// CHECK: scf.parallel (%[[TOK:.*]]) = (%c0) to (%[[T]]) step (%c1) {
// CHECK:   scf.for %[[J:.*]] = %c0 to %c2 step %c1 {
// CHECK:     %[[ID:.*]] = memref.load %[[IDS]][%[[TOK]], %[[J]]] : memref<?x2xi32>
// CHECK:     %[[LT:.*]] = arith.cmpi slt, %[[ID]], %c8_i32 : i32
// CHECK:     %[[GE:.*]] = arith.cmpi sge, %[[ID]], %c0_i32 : i32
// CHECK:     %[[OK:.*]] = arith.andi %[[GE]], %[[LT]] : i1
// CHECK:     scf.if %[[OK]] {
// CHECK:       %[[AT:.*]] = arith.index_cast %[[ID]] : i32 to index
// CHECK:       memref.atomic_rmw addi %c1_i32, %[[COUNTS]][%[[AT]]] : (i32, memref<8xi32>) -> i32
// CHECK: %[[FOUND:.*]] = scf.for %[[E2:.*]] = %c0 to %c8 step %c1 iter_args(%[[N:.*]] = %c0_i32) -> (i32) {
// CHECK:   %[[C:.*]] = memref.load %[[COUNTS]][%[[E2]]] : memref<8xi32>
// CHECK:   %[[HAS:.*]] = arith.cmpi sgt, %[[C]], %c0_i32 : i32
// CHECK:   scf.if %[[HAS]] {
// CHECK:     %[[POS:.*]] = arith.index_cast %[[N]] : i32 to index
// CHECK:     %[[EI:.*]] = arith.index_cast %[[E2]] : index to i32
// CHECK:     memref.store %[[EI]], %[[ACTIVE]][%[[POS]]] : memref<8xi32>
// CHECK: %[[FROM:.*]] = arith.index_cast %[[FOUND]] : i32 to index
// CHECK: scf.for %[[I:.*]] = %[[FROM]] to %c8 step %c1 {
// CHECK:   memref.store %c-1_i32, %[[ACTIVE]][%[[I]]] : memref<8xi32>
// CHECK: memref.store %[[FOUND]], %[[NUM]][%c0] : memref<1xi32>
moe.router @counts(%ids: tensor<?x2xi32>)
    -> (expert_counts: tensor<8xi32>, active: tensor<8xi32>, num_active: tensor<1xi32>)
    attributes {experts = 8, top_k = 2} {
  %counts = moe.expert_counts %ids : tensor<?x2xi32> -> tensor<8xi32>
  %a, %n = moe.compact_active %counts : tensor<8xi32> -> tensor<8xi32>, tensor<1xi32>
  moe.yield %counts, %a, %n : tensor<8xi32>, tensor<8xi32>, tensor<1xi32>
}

// align_blocks (block 4) on the host: sorted_token_ids has T*2 + 8*3 entries (filled
// with T*2, the padding id), expert_ids ceil((T*2 + 24) / 4) (filled with -1); each
// expert's segment starts at the padded prefix sum (kept in an [8] temporary, the next
// free position) and its blocks get its id; then the slots in token order are placed.
// CHECK-LABEL: func.func @align(
// CHECK-SAME: %[[T:[a-z0-9]+]]: index, %[[IDS:[a-z0-9]+]]: memref<?x2xi32>, %[[COUNTS:[a-z0-9]+]]: memref<8xi32>,
// CHECK-SAME: %[[SORTED:[a-z0-9]+]]: memref<?xi32>, %[[BLOCKS:[a-z0-9]+]]: memref<?xi32>, %[[PADDED:[a-z0-9]+]]: memref<1xi32>)
// CHECK: %[[SLOTS:.*]] = arith.muli %[[T]], %c2 : index
// CHECK: %[[SORTEDSIZE:.*]] = arith.addi %{{.*}}, %c24 : index
// CHECK: %[[BLOCKCOUNT:.*]] = arith.divui %{{.*}}, %c4 : index
// CHECK: %[[PAD:.*]] = arith.index_cast %[[SLOTS]] : index to i32
// CHECK: scf.for %[[I:.*]] = %c0 to %[[SORTEDSIZE]] step %c1 {
// CHECK:   memref.store %[[PAD]], %[[SORTED]][%[[I]]] : memref<?xi32>
// CHECK: scf.for %[[I2:.*]] = %c0 to %[[BLOCKCOUNT]] step %c1 {
// CHECK:   memref.store %c-1_i32, %[[BLOCKS]][%[[I2]]] : memref<?xi32>
// CHECK: %[[NEXT:.*]] = memref.alloc() : memref<8xi32>
// CHECK: %[[TOTAL:.*]] = scf.for %[[E:.*]] = %c0 to %c8 step %c1 iter_args(%[[START:.*]] = %c0_i32) -> (i32) {
// CHECK:   %[[UP:.*]] = arith.addi %{{.*}}, %c3_i32 : i32
// CHECK:   %[[NB:.*]] = arith.divui %[[UP]], %c4_i32 : i32
// CHECK:   memref.store %[[START]], %[[NEXT]][%[[E]]] : memref<8xi32>
// CHECK:   %[[FIRSTB:.*]] = arith.divui %[[START]], %c4_i32 : i32
// CHECK:   scf.for %{{.*}} = %c0 to %{{.*}} step %c1 {
// CHECK:     %[[AT:.*]] = arith.addi %{{.*}}, %{{.*}} : index
// CHECK:     %[[INSIDE:.*]] = arith.cmpi ult, %[[AT]], %[[BLOCKCOUNT]] : index
// CHECK:     scf.if %[[INSIDE]] {
// CHECK:       memref.store %{{.*}}, %[[BLOCKS]][%[[AT]]] : memref<?xi32>
// CHECK:   %[[PADDEDN:.*]] = arith.muli %[[NB]], %c4_i32 : i32
// CHECK:   %[[END:.*]] = arith.addi %[[START]], %[[PADDEDN]] : i32
// CHECK:   scf.yield %[[END]] : i32
// CHECK: scf.for %[[SLOT:.*]] = %c0 to %[[SLOTS]] step %c1 {
// CHECK:   %[[TT:.*]] = arith.divui %[[SLOT]], %c2 : index
// CHECK:   %[[JJ:.*]] = arith.remui %[[SLOT]], %c2 : index
// CHECK:   %[[X:.*]] = memref.load %[[IDS]][%[[TT]], %[[JJ]]] : memref<?x2xi32>
// CHECK:   scf.if %{{.*}} {
// CHECK:     %[[XI:.*]] = arith.index_cast %[[X]] : i32 to index
// CHECK:     %[[POS:.*]] = memref.load %[[NEXT]][%[[XI]]] : memref<8xi32>
// CHECK:     arith.cmpi ult, %{{.*}}, %[[SORTEDSIZE]] : index
// CHECK:     scf.if
// CHECK:       memref.store %{{.*}}, %[[SORTED]][%{{.*}}] : memref<?xi32>
// CHECK:     %[[POS1:.*]] = arith.addi %[[POS]], %c1_i32 : i32
// CHECK:     memref.store %[[POS1]], %[[NEXT]][%[[XI]]] : memref<8xi32>
// CHECK: memref.store %[[TOTAL]], %[[PADDED]][%c0] : memref<1xi32>
// CHECK: memref.dealloc %[[NEXT]]
moe.router @align(%ids: tensor<?x2xi32>, %counts: tensor<8xi32>)
    -> (sorted_token_ids: tensor<?xi32>, expert_ids: tensor<?xi32>,
        num_tokens_post_padded: tensor<1xi32>) attributes {experts = 8, top_k = 2} {
  %sorted, %blocks, %padded = moe.align_blocks %ids, %counts block_size = 4
      : tensor<?x2xi32>, tensor<8xi32> -> tensor<?xi32>, tensor<?xi32>, tensor<1xi32>
  moe.yield %sorted, %blocks, %padded : tensor<?xi32>, tensor<?xi32>, tensor<1xi32>
}

// fill_empty_slots after a route and its counts: the route's results and the counts
// are [T, 2] / [8] temporaries; per token, an empty slot gets the token's first valid
// id, else the lowest expert with tokens (the largest key 8 - e), else 0, and weight 0.
// CHECK-LABEL: func.func @fill_empty(
// CHECK-SAME: %[[T:[a-z0-9]+]]: index, %{{.*}}: memref<?x8xf32>, %{{.*}}: memref<8xi8>, %[[OUTIDS:[a-z0-9]+]]: memref<?x2xi32>, %[[OUTW:[a-z0-9]+]]: memref<?x2xf32>)
// CHECK-DAG: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: %[[IDS:.*]] = memref.alloc(%[[T]]) : memref<?x2xi32>
// CHECK: %[[W:.*]] = memref.alloc(%[[T]]) : memref<?x2xf32>
// CHECK: scf.parallel
// CHECK:   memref.store %{{.*}}, %[[IDS]]
// CHECK:   memref.store %{{.*}}, %[[W]]
// CHECK: %[[COUNTS:.*]] = memref.alloc() : memref<8xi32>
// CHECK: scf.parallel
// CHECK:   memref.atomic_rmw addi %c1_i32, %[[COUNTS]]
// CHECK: scf.parallel (%[[TOK:.*]]) = (%c0) to (%[[T]]) step (%c1) {
// CHECK:   %[[OWN:.*]] = scf.for %{{.*}} = %c0 to %c2 step %c1 iter_args(%{{.*}} = %c-1_i32) -> (i32) {
// CHECK:   %[[KEY:.*]] = scf.for %[[E:.*]] = %c0 to %c8 step %c1 iter_args(%[[K:.*]] = %c0_i32) -> (i32) {
// CHECK:     %[[C:.*]] = memref.load %[[COUNTS]][%[[E]]] : memref<8xi32>
// CHECK:     %[[USED:.*]] = arith.cmpi sgt, %[[C]], %c0_i32 : i32
// CHECK:     %[[EI:.*]] = arith.index_cast %[[E]] : index to i32
// CHECK:     %[[INV:.*]] = arith.subi %c8_i32, %[[EI]] : i32
// CHECK:     %[[CAND:.*]] = arith.select %[[USED]], %[[INV]], %c0_i32 : i32
// CHECK:     arith.maxui %[[K]], %[[CAND]] : i32
// CHECK:   %[[LOWEST:.*]] = arith.subi %c8_i32, %[[KEY]] : i32
// CHECK:   %[[ANYUSED:.*]] = arith.cmpi sgt, %[[KEY]], %c0_i32 : i32
// CHECK:   %[[FALLBACK:.*]] = arith.select %[[ANYUSED]], %[[LOWEST]], %c0_i32 : i32
// CHECK:   %[[HASOWN:.*]] = arith.cmpi sge, %[[OWN]], %c0_i32 : i32
// CHECK:   %[[FILL:.*]] = arith.select %[[HASOWN]], %[[OWN]], %[[FALLBACK]] : i32
// CHECK:   scf.for %[[J:.*]] = %c0 to %c2 step %c1 {
// CHECK:     %[[X:.*]] = memref.load %[[IDS]][%[[TOK]], %[[J]]] : memref<?x2xi32>
// CHECK:     %[[VALID:.*]] = arith.andi %{{.*}}, %{{.*}} : i1
// CHECK:     %[[NEWID:.*]] = arith.select %[[VALID]], %[[X]], %[[FILL]] : i32
// CHECK:     memref.store %[[NEWID]], %[[OUTIDS]][%[[TOK]], %[[J]]] : memref<?x2xi32>
// CHECK:     %[[WV:.*]] = memref.load %[[W]][%[[TOK]], %[[J]]] : memref<?x2xf32>
// CHECK:     %[[NEWW:.*]] = arith.select %[[VALID]], %[[WV]], %[[ZERO]] : f32
// CHECK:     memref.store %[[NEWW]], %[[OUTW]][%[[TOK]], %[[J]]] : memref<?x2xf32>
moe.router @fill_empty(%logits: tensor<?x8xf32>, %sel: !moe.set<8>)
    -> (topk_ids: tensor<?x2xi32>, topk_weights: tensor<?x2xf32>)
    attributes {experts = 8, top_k = 2} {
  %ids, %w = moe.route %logits within %sel k = 2
      : tensor<?x8xf32>, !moe.set<8> -> tensor<?x2xi32>, tensor<?x2xf32>
  %counts = moe.expert_counts %ids : tensor<?x2xi32> -> tensor<8xi32>
  %fi, %fw = moe.fill_empty_slots %ids, %w batch(%counts : tensor<8xi32>) experts = 8
      : tensor<?x2xi32>, tensor<?x2xf32>
  moe.yield %fi, %fw : tensor<?x2xi32>, tensor<?x2xf32>
}

// capacity (GShard order) on the host: C = ceil(factor * T*2 / 8) in f64, clamped to
// [0, T*2]; all first choices in token order, then all second choices; a slot is kept
// while its expert has taken fewer than C, else dropped (id -1, weight 0) and counted.
// CHECK-LABEL: func.func @capacity(
// CHECK-SAME: %[[T:[a-z0-9]+]]: index, %[[IDS:[a-z0-9]+]]: memref<?x2xi32>, %[[W:[a-z0-9]+]]: memref<?x2xf32>,
// CHECK-SAME: %[[KEPT:[a-z0-9]+]]: memref<?x2xi32>, %[[KW:[a-z0-9]+]]: memref<?x2xf32>, %[[COUNTS:[a-z0-9]+]]: memref<8xi32>,
// CHECK-SAME: %[[DROPPED:[a-z0-9]+]]: memref<1xi32>, %[[CF:[a-z0-9]+]]: f32)
// CHECK-DAG: %[[EIGHT:.*]] = arith.constant 8.000000e+00 : f64
// CHECK: %[[CF64:.*]] = arith.extf %[[CF]] : f32 to f64
// CHECK: %[[PROD:.*]] = arith.mulf %[[CF64]], %{{.*}} : f64
// CHECK: %[[X:.*]] = arith.divf %[[PROD]], %[[EIGHT]] : f64
// CHECK: %[[Q:.*]] = arith.fptosi %{{.*}} : f64 to i64
// CHECK: %[[QUP:.*]] = arith.addi %[[Q]], %c1_i64 : i64
// CHECK: %[[FRAC:.*]] = arith.cmpf olt, %{{.*}}, %{{.*}} : f64
// CHECK: %[[CEIL:.*]] = arith.select %[[FRAC]], %[[QUP]], %[[Q]] : i64
// CHECK: %[[CIDX:.*]] = arith.index_cast %[[CEIL]] : i64 to index
// CHECK: %[[CAP:.*]] = arith.index_cast %[[CIDX]] : index to i32
// CHECK: scf.for
// CHECK:   memref.store %c0_i32, %[[COUNTS]]
// CHECK: %[[LOST:.*]] = scf.for %[[J:.*]] = %c0 to %c2 step %c1 iter_args(%{{.*}} = %c0_i32) -> (i32) {
// CHECK:   scf.for %[[TOK:.*]] = %c0 to %[[T]] step %c1 iter_args(%[[N:.*]] = %{{.*}}) -> (i32) {
// CHECK:     %[[E:.*]] = memref.load %[[IDS]][%[[TOK]], %[[J]]] : memref<?x2xi32>
// CHECK:     %[[TAKEN:.*]] = memref.load %[[COUNTS]][%{{.*}}] : memref<8xi32>
// CHECK:     %[[ROOM:.*]] = arith.cmpi slt, %[[TAKEN]], %[[CAP]] : i32
// CHECK:     %[[KEEP:.*]] = arith.andi %{{.*}}, %[[ROOM]] : i1
// CHECK:     scf.if %[[KEEP]] {
// CHECK:       arith.addi %[[TAKEN]], %c1_i32 : i32
// CHECK:     %[[KI:.*]] = arith.select %[[KEEP]], %[[E]], %c-1_i32 : i32
// CHECK:     memref.store %[[KI]], %[[KEPT]][%[[TOK]], %[[J]]] : memref<?x2xi32>
// CHECK:     memref.store %{{.*}}, %[[KW]][%[[TOK]], %[[J]]] : memref<?x2xf32>
// CHECK:     %[[DROP:.*]] = arith.extui %{{.*}} : i1 to i32
// CHECK:     arith.addi %[[N]], %[[DROP]] : i32
// CHECK: memref.store %[[LOST]], %[[DROPPED]][%c0] : memref<1xi32>
moe.router @capacity(%ids: tensor<?x2xi32>, %w: tensor<?x2xf32>)
    -> (kept_ids: tensor<?x2xi32>, kept_weights: tensor<?x2xf32>, counts: tensor<8xi32>,
        dropped: tensor<1xi32>) attributes {experts = 8, top_k = 2} {
  %cf = moe.knob "capacity_factor" = 1.25 : f32
  %kept, %kw, %counts, %dropped = moe.capacity %ids, %w capacity_factor(%cf : f32)
      : tensor<?x2xi32>, tensor<?x2xf32>
      -> tensor<?x2xi32>, tensor<?x2xf32>, tensor<8xi32>, tensor<1xi32>
  moe.yield %kept, %kw, %counts, %dropped
      : tensor<?x2xi32>, tensor<?x2xf32>, tensor<8xi32>, tensor<1xi32>
}

// expert_choice: per expert (parallel), the C-th best token's key by a radix select
// over order-preserving i32 keys (32 bit passes over the tokens, -0 folded, NaN key 0),
// then how many tokens beat it and the last tied token taken; per token, up to 3
// experts that take it, best key first; the grouped layout places each expert's tokens
// at e * ceil(C / 16) * 16.
// CHECK-LABEL: func.func @expert_choice(
// CHECK-SAME: %[[T:[a-z0-9]+]]: index, %[[S:[a-z0-9]+]]: memref<?x8xf32>, %[[EIDS:[a-z0-9]+]]: memref<?x3xi32>, %[[EW:[a-z0-9]+]]: memref<?x3xf32>,
// CHECK-SAME: %[[ETOK:[a-z0-9]+]]: memref<?xi32>, %[[CF:[a-z0-9]+]]: f32)
// CHECK-DAG: %[[SIGN:.*]] = arith.constant -2147483648 : i32
// CHECK: %[[C:.*]] = arith.index_cast %{{.*}} : index to i32
// CHECK: %[[KTH:.*]] = memref.alloc() : memref<8xi32>
// CHECK: %[[LAST:.*]] = memref.alloc() : memref<8xi32>
// CHECK: scf.parallel (%[[E:.*]]) = (%c0) to (%c8) step (%c1) {
// CHECK:   %[[K:.*]] = scf.for %[[BIT:.*]] = %c0 to %c32 step %c1 iter_args(%[[PREFIX:.*]] = %c0_i32) -> (i32) {
// CHECK:     %[[SH:.*]] = arith.subi %c31, %[[BIT]] : index
// CHECK:     %[[TRY:.*]] = arith.ori %[[PREFIX]], %{{.*}} : i32
// CHECK:     %[[ATLEAST:.*]] = scf.for %[[TOK:.*]] = %c0 to %[[T]] step %c1 iter_args(%{{.*}} = %c0_i32) -> (i32) {
// CHECK:       memref.load %[[S]][%[[TOK]], %[[E]]]
// CHECK:       %[[BITS:.*]] = arith.bitcast %{{.*}} : f32 to i32
// CHECK:       %[[NEGK:.*]] = arith.xori %[[BITS]], %c-1_i32 : i32
// CHECK:       %[[POSK:.*]] = arith.ori %[[BITS]], %[[SIGN]] : i32
// CHECK:       arith.cmpi uge, %{{.*}}, %[[TRY]] : i32
// CHECK:     %[[ENOUGH:.*]] = arith.cmpi sge, %[[ATLEAST]], %[[C]] : i32
// CHECK:     arith.select %[[ENOUGH]], %[[TRY]], %[[PREFIX]] : i32
// CHECK:   %[[ABOVE:.*]] = scf.for {{.*}} -> (i32) {
// CHECK:     arith.cmpi ugt, %{{.*}}, %[[K]] : i32
// CHECK:   %[[TIES:.*]] = arith.subi %[[C]], %[[ABOVE]] : i32
// CHECK:   %[[TIE:.*]]:2 = scf.for {{.*}} -> (i32, i32) {
// CHECK:     arith.cmpi eq, %{{.*}}, %[[K]] : i32
// CHECK:     arith.cmpi eq, %{{.*}}, %[[TIES]] : i32
// CHECK:   memref.store %[[K]], %[[KTH]][%[[E]]] : memref<8xi32>
// CHECK:   memref.store %[[TIE]]#1, %[[LAST]][%[[E]]] : memref<8xi32>
// The per-token view: token t is taken by e iff key > K[e], or key == K[e] and t <= last[e].
// CHECK: scf.parallel (%[[TOK2:.*]]) = (%c0) to (%[[T]]) step (%c1) {
// CHECK:   scf.for %[[J:.*]] = %c0 to %c3 step %c1 iter_args({{.*}}) -> (i32, i32, i32) {
// CHECK:     %[[PICK:.*]]:2 = scf.for %[[E2:.*]] = %c0 to %c8 step %c1 iter_args({{.*}}) -> (i32, i32) {
// CHECK:       %[[L:.*]] = memref.load %[[LAST]][%[[E2]]] : memref<8xi32>
// CHECK:       %[[KE:.*]] = memref.load %[[KTH]][%[[E2]]] : memref<8xi32>
// CHECK:       %[[TI:.*]] = arith.index_cast %[[TOK2]] : index to i32
// CHECK:       %[[EARLY:.*]] = arith.cmpi sle, %[[TI]], %[[L]] : i32
// CHECK:       %[[EQ:.*]] = arith.cmpi eq, %{{.*}}, %[[KE]] : i32
// CHECK:       %[[TIED:.*]] = arith.andi %[[EQ]], %[[EARLY]] : i1
// CHECK:       %[[GT:.*]] = arith.cmpi ugt, %{{.*}}, %[[KE]] : i32
// CHECK:       arith.ori %[[GT]], %[[TIED]] : i1
// CHECK:     memref.store %[[PICK]]#1, %[[EIDS]][%[[TOK2]], %[[J]]] : memref<?x3xi32>
// CHECK:     memref.store %{{.*}}, %[[EW]][%[[TOK2]], %[[J]]] : memref<?x3xf32>
// The grouped layout: T*8 + 120 entries, filled with T; expert e from e * ceil(C/16) * 16.
// CHECK: %[[N8:.*]] = arith.muli %[[T]], %c8 : index
// CHECK: %[[SIZE:.*]] = arith.addi %[[N8]], %c120 : index
// CHECK: scf.parallel (%[[I:.*]]) = (%c0) to (%[[SIZE]]) step (%c1) {
// CHECK:   memref.store %{{.*}}, %[[ETOK]][%[[I]]] : memref<?xi32>
// CHECK: %[[CUP:.*]] = arith.addi %[[C]], %c15_i32 : i32
// CHECK: %[[NBLOCKS:.*]] = arith.divui %[[CUP]], %c16_i32 : i32
// CHECK: scf.parallel (%[[E3:.*]]) = (%c0) to (%c8) step (%c1) {
// CHECK:   %[[E3I:.*]] = arith.index_cast %[[E3]] : index to i32
// CHECK:   %[[B:.*]] = arith.muli %[[E3I]], %[[NBLOCKS]] : i32
// CHECK:   %[[BASE:.*]] = arith.muli %[[B]], %c16_i32 : i32
// CHECK:   scf.for %{{.*}} = %c0 to %[[T]] step %c1 iter_args(%{{.*}} = %[[BASE]]) -> (i32) {
// CHECK:     scf.if
// CHECK:       memref.store %{{.*}}, %[[ETOK]][%{{.*}}] : memref<?xi32>
// CHECK: memref.dealloc %[[KTH]]
// CHECK: memref.dealloc %[[LAST]]
moe.router @expert_choice(%scores: tensor<?x8xf32>)
    -> (ec_ids: tensor<?x3xi32>, ec_weights: tensor<?x3xf32>, ec_tokens: tensor<?xi32>)
    attributes {experts = 8, top_k = 2} {
  %cf = moe.knob "capacity_factor" = 1.0 : f32
  %eids, %ew, %etok, %etw, %eblocks, %epad, %eun = moe.expert_choice %scores
      capacity_factor(%cf : f32) k = 2 max_experts = 3 block_size = 16
      : tensor<?x8xf32> -> tensor<?x3xi32>, tensor<?x3xf32>, tensor<?xi32>, tensor<?xf32>,
        tensor<?xi32>, tensor<1xi32>, tensor<1xi32>
  moe.yield %eids, %ew, %etok : tensor<?x3xi32>, tensor<?x3xf32>, tensor<?xi32>
}
