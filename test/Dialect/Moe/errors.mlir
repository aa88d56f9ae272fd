// RUN: moe-opt %s -split-input-file -verify-diagnostics

// One case per verifier rule of the moe dialect. Cases that need to be inside a
// router (expert counts, k vs top_k, knob uniqueness) use one; pure range and shape
// checks on set-typed operands are placed in a func.func so that only the op's own
// verifier (and not the router's expert-type check) can reject them.

//===----------------------------------------------------------------------===//
// Types: !moe.set, !moe.placement
//===----------------------------------------------------------------------===//

// expected-error @+1 {{an expert set needs at least one expert, got 0}}
func.func private @set_no_experts(!moe.set<0>)

// -----

// expected-error @+1 {{a placement needs at least one expert, got 0}}
func.func private @placement_no_experts(!moe.placement<experts = 0, devices = 1, slots = 1>)

// -----

// expected-error @+1 {{a placement needs at least one device, got 0}}
func.func private @placement_no_devices(!moe.placement<experts = 4, devices = 0, slots = 4>)

// -----

// expected-error @+1 {{a placement needs at least one slot per expert: slots (3) < experts (4)}}
func.func private @placement_few_slots(!moe.placement<experts = 4, devices = 1, slots = 3>)

// -----

// expected-error @+1 {{slots (9) must be a multiple of devices (2) so that every device hosts the same number}}
func.func private @placement_uneven(!moe.placement<experts = 8, devices = 2, slots = 9>)

//===----------------------------------------------------------------------===//
// moe.router
//===----------------------------------------------------------------------===//

// -----

// expected-error @+1 {{'moe.router' op experts must be >= 1, got 0}}
moe.router @no_experts(%x: tensor<?x2xi32>) -> (topk_ids: tensor<?x2xi32>)
    attributes {experts = 0, top_k = 1} {
  moe.yield %x : tensor<?x2xi32>
}

// -----

// expected-error @+1 {{'moe.router' op top_k must be >= 1, got 0}}
moe.router @top_k_zero(%x: tensor<?x2xi32>) -> (topk_ids: tensor<?x2xi32>)
    attributes {experts = 8, top_k = 0} {
  moe.yield %x : tensor<?x2xi32>
}

// -----

// expected-error @+1 {{'moe.router' op top_k must be in [1, experts = 8], got 9}}
moe.router @top_k_too_large(%x: tensor<?x2xi32>) -> (topk_ids: tensor<?x2xi32>)
    attributes {experts = 8, top_k = 9} {
  moe.yield %x : tensor<?x2xi32>
}

// -----

// expected-error @+1 {{'moe.router' op shared_experts must be >= 0, got -1}}
moe.router @negative_shared(%x: tensor<?x2xi32>) -> (topk_ids: tensor<?x2xi32>)
    attributes {experts = 8, top_k = 2, shared_experts = -1} {
  moe.yield %x : tensor<?x2xi32>
}

// -----

// The custom syntax derives arg_names / result_names from the signature; only the
// generic form can get them out of step with function_type.
// expected-error @+1 {{'moe.router' op has 1 arguments but 2 argument names}}
"moe.router"() <{arg_names = ["a", "b"], experts = 8 : i64,
                 function_type = (tensor<?x8xf32>) -> tensor<?x8xf32>,
                 result_names = ["out"], sym_name = "arg_names_count", top_k = 2 : i64}> ({
^bb0(%a: tensor<?x8xf32>):
  "moe.yield"(%a) : (tensor<?x8xf32>) -> ()
}) : () -> ()

// -----

// expected-error @+1 {{'moe.router' op has 1 results but 0 result names}}
"moe.router"() <{arg_names = ["a"], experts = 8 : i64,
                 function_type = (tensor<?x8xf32>) -> tensor<?x8xf32>,
                 result_names = [], sym_name = "result_names_count", top_k = 2 : i64}> ({
^bb0(%a: tensor<?x8xf32>):
  "moe.yield"(%a) : (tensor<?x8xf32>) -> ()
}) : () -> ()

// -----

// expected-error @+1 {{'moe.router' op argument name '0' is not an identifier ([A-Za-z_][A-Za-z0-9_]*)}}
moe.router @numeric_arg_name(%0: tensor<?x8xf32>) -> (out: tensor<?x8xf32>)
    attributes {experts = 8, top_k = 2} {
  moe.yield %0 : tensor<?x8xf32>
}

// -----

// expected-error @+1 {{'moe.router' op duplicate argument name 'logits'}}
"moe.router"() <{arg_names = ["logits", "logits"], experts = 8 : i64,
                 function_type = (tensor<?x8xf32>, tensor<?x8xf32>) -> tensor<?x8xf32>,
                 result_names = ["out"], sym_name = "duplicate_arg_name", top_k = 2 : i64}> ({
^bb0(%a: tensor<?x8xf32>, %b: tensor<?x8xf32>):
  "moe.yield"(%a) : (tensor<?x8xf32>) -> ()
}) : () -> ()

// -----

// expected-error @+1 {{'moe.router' op result name 'topk-ids' is not an identifier ([A-Za-z_][A-Za-z0-9_]*)}}
moe.router @bad_result_name(%x: tensor<?x2xi32>) -> ("topk-ids": tensor<?x2xi32>)
    attributes {experts = 8, top_k = 2} {
  moe.yield %x : tensor<?x2xi32>
}

// -----

// expected-error @+1 {{'moe.router' op duplicate result name 'ids'}}
moe.router @duplicate_result_name(%x: tensor<?x2xi32>)
    -> (ids: tensor<?x2xi32>, ids: tensor<?x2xi32>) attributes {experts = 8, top_k = 2} {
  moe.yield %x, %x : tensor<?x2xi32>, tensor<?x2xi32>
}

// -----

// expected-error @+1 {{'moe.router' op must have at least one result}}
moe.router @no_results(%x: tensor<?x8xf32>) -> () attributes {experts = 8, top_k = 2} {
  moe.yield
}

// -----

// expected-error @+1 {{'moe.router' op type of entry block argument #0('tensor<?x4xf32>') must match the type of the corresponding argument in function signature('tensor<?x8xf32>')}}
"moe.router"() <{arg_names = ["a"], experts = 8 : i64,
                 function_type = (tensor<?x8xf32>) -> tensor<?x8xf32>,
                 result_names = ["out"], sym_name = "block_args", top_k = 2 : i64}> ({
^bb0(%a: tensor<?x4xf32>):
  %c = "arith.constant"() <{value = dense<0.0> : tensor<1x8xf32>}> : () -> tensor<1x8xf32>
  %d = "tensor.cast"(%c) : (tensor<1x8xf32>) -> tensor<?x8xf32>
  "moe.yield"(%d) : (tensor<?x8xf32>) -> ()
}) : () -> ()

// -----

// Expert sets and placements passed in must be over the router's experts.
moe.router @arg_placement_size(%x: tensor<?x8xf32>,
    // expected-error @+1 {{'!moe.placement<experts = 4, devices = 1, slots = 4>' is over 4 experts but the enclosing router has 8}}
    %placement: !moe.placement<experts = 4, devices = 1, slots = 4>)
    -> (out: tensor<?x8xf32>) attributes {experts = 8, top_k = 2} {
  moe.yield %x : tensor<?x8xf32>
}

// -----

// ... and so must every set produced in the body.
moe.router @result_set_size(%x: tensor<?x8xf32>) -> (out: tensor<?x8xf32>)
    attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'!moe.set<4>' is over 4 experts but the enclosing router has 8}}
  %s = moe.empty_set : !moe.set<4>
  moe.yield %x : tensor<?x8xf32>
}

// -----

moe.router @duplicate_knob(%x: tensor<?x8xf32>) -> (out: tensor<?x8xf32>)
    attributes {experts = 8, top_k = 2} {
  %a = moe.knob "budget" = 4 : i64
  // expected-error @+1 {{'moe.knob' op duplicate knob name 'budget' in router @duplicate_knob}}
  %b = moe.knob "budget" = 5 : i64
  moe.yield %x : tensor<?x8xf32>
}

// -----

// Knob names are unique across nested phase-gate regions too.
moe.router @duplicate_knob_nested(%x: tensor<?x8xf32>) -> (out: tensor<?x8xf32>)
    attributes {experts = 8, top_k = 2} {
  %a = moe.knob "alpha" = 2.0 : f32
  %y = moe.when %x : tensor<?x8xf32> max_tokens = 64 -> (tensor<?x8xf32>) {
    // expected-error @+1 {{'moe.knob' op duplicate knob name 'alpha' in router @duplicate_knob_nested}}
    %b = moe.knob "alpha" = 1.0 : f32
    %s = moe.scale %x, %b : tensor<?x8xf32>
    moe.yield %s : tensor<?x8xf32>
  } else {
    moe.yield %x : tensor<?x8xf32>
  }
  moe.yield %y : tensor<?x8xf32>
}

//===----------------------------------------------------------------------===//
// moe.yield
//===----------------------------------------------------------------------===//

// -----

moe.router @yield_router_types(%x: tensor<?x8xf32>) -> (out: tensor<?x8xf32>)
    attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.yield' op returns ('tensor<?x8xf32>', 'tensor<?x8xf32>') but the enclosing 'moe.router' expects ('tensor<?x8xf32>')}}
  moe.yield %x, %x : tensor<?x8xf32>, tensor<?x8xf32>
}

// -----

moe.router @yield_when_types(%x: tensor<?x8xf32>, %ids: tensor<?x2xi32>)
    -> (out: tensor<?x2xi32>) attributes {experts = 8, top_k = 2} {
  %y = moe.when %x : tensor<?x8xf32> max_tokens = 64 -> (tensor<?x2xi32>) {
    moe.yield %ids : tensor<?x2xi32>
  } else {
    // expected-error @+1 {{'moe.yield' op returns ('tensor<?x8xf32>') but the enclosing 'moe.when' expects ('tensor<?x2xi32>')}}
    moe.yield %x : tensor<?x8xf32>
  }
  moe.yield %y : tensor<?x2xi32>
}

// -----

func.func @yield_outside_router() {
  // expected-error @+1 {{'moe.yield' op expects parent op to be one of 'moe.router, moe.residency, moe.balance, moe.prefetch, moe.when, moe.stage'}}
  moe.yield
}

//===----------------------------------------------------------------------===//
// moe.knob
//===----------------------------------------------------------------------===//

// -----

moe.router @knob_name(%x: tensor<?x8xf32>) -> (out: tensor<?x8xf32>)
    attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.knob' op knob name 'max-tokens' is not an identifier ([A-Za-z_][A-Za-z0-9_]*)}}
  %k = moe.knob "max-tokens" = 4 : i64
  moe.yield %x : tensor<?x8xf32>
}

// -----

moe.router @knob_empty_name(%x: tensor<?x8xf32>) -> (out: tensor<?x8xf32>)
    attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.knob' op knob name '' is not an identifier}}
  %k = moe.knob "" = 4 : i64
  moe.yield %x : tensor<?x8xf32>
}

// -----

moe.router @knob_string_default(%x: tensor<?x8xf32>) -> (out: tensor<?x8xf32>)
    attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.knob' op default must be an integer or float literal}}
  %k = moe.knob "budget" = "four" : i64
  moe.yield %x : tensor<?x8xf32>
}

// -----

moe.router @knob_infinite_default(%x: tensor<?x8xf32>) -> (out: tensor<?x8xf32>)
    attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.knob' op default must be finite}}
  %k = moe.knob "alpha" = 0x7F800000 : f32
  moe.yield %x : tensor<?x8xf32>
}

// -----

moe.router @knob_nan_default(%x: tensor<?x8xf32>) -> (out: tensor<?x8xf32>)
    attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.knob' op default must be finite}}
  %k = moe.knob "theta" = 0x7FC00000 : f32
  moe.yield %x : tensor<?x8xf32>
}

// -----

// Integer knobs are i64 and real knobs f32.
moe.router @knob_type(%x: tensor<?x8xf32>) -> (out: tensor<?x8xf32>)
    attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.knob' op result #0 must be 64-bit signless integer or 32-bit float, but got 'i32'}}
  %k = moe.knob "budget" = 4 : i32
  moe.yield %x : tensor<?x8xf32>
}

//===----------------------------------------------------------------------===//
// moe.when
//===----------------------------------------------------------------------===//

// -----

moe.router @when_negative_max_tokens(%x: tensor<?x8xf32>) -> (out: tensor<?x8xf32>)
    attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.when' op max_tokens must be >= 0, got -1}}
  %y = moe.when %x : tensor<?x8xf32> max_tokens = -1 -> (tensor<?x8xf32>) {
    moe.yield %x : tensor<?x8xf32>
  } else {
    moe.yield %x : tensor<?x8xf32>
  }
  moe.yield %y : tensor<?x8xf32>
}

// -----

moe.router @when_phases_without_phase(%x: tensor<?x8xf32>) -> (out: tensor<?x8xf32>)
    attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.when' op phases need a phase operand to compare against}}
  %y = moe.when %x : tensor<?x8xf32> max_tokens = 64 phases = [decode]
      -> (tensor<?x8xf32>) {
    moe.yield %x : tensor<?x8xf32>
  } else {
    moe.yield %x : tensor<?x8xf32>
  }
  moe.yield %y : tensor<?x8xf32>
}

// -----

moe.router @when_phase_without_phases(%x: tensor<?x8xf32>, %phase: i32)
    -> (out: tensor<?x8xf32>) attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.when' op a phase operand needs the list of phases it must be in}}
  %y = moe.when %x : tensor<?x8xf32> phase(%phase : i32) max_tokens = 64
      -> (tensor<?x8xf32>) {
    moe.yield %x : tensor<?x8xf32>
  } else {
    moe.yield %x : tensor<?x8xf32>
  }
  moe.yield %y : tensor<?x8xf32>
}

// -----

moe.router @when_empty_phases(%x: tensor<?x8xf32>, %phase: i32)
    -> (out: tensor<?x8xf32>) attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.when' op phases must not be empty}}
  %y = moe.when %x : tensor<?x8xf32> phase(%phase : i32) max_tokens = 64 phases = []
      -> (tensor<?x8xf32>) {
    moe.yield %x : tensor<?x8xf32>
  } else {
    moe.yield %x : tensor<?x8xf32>
  }
  moe.yield %y : tensor<?x8xf32>
}

// -----

moe.router @when_duplicate_phase(%x: tensor<?x8xf32>, %phase: i32)
    -> (out: tensor<?x8xf32>) attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.when' op phase 'decode' is listed twice}}
  %y = moe.when %x : tensor<?x8xf32> phase(%phase : i32) max_tokens = 64
      phases = [decode, mixed, decode] -> (tensor<?x8xf32>) {
    moe.yield %x : tensor<?x8xf32>
  } else {
    moe.yield %x : tensor<?x8xf32>
  }
  moe.yield %y : tensor<?x8xf32>
}

// -----

moe.router @when_unknown_phase(%x: tensor<?x8xf32>, %phase: i32)
    -> (out: tensor<?x8xf32>) attributes {experts = 8, top_k = 2} {
  %y = moe.when %x : tensor<?x8xf32> phase(%phase : i32) max_tokens = 64
      // expected-error @+1 {{unknown phase 'chunked' (expected prefill, decode or mixed)}}
      phases = [chunked] -> (tensor<?x8xf32>) {
    moe.yield %x : tensor<?x8xf32>
  } else {
    moe.yield %x : tensor<?x8xf32>
  }
  moe.yield %y : tensor<?x8xf32>
}

//===----------------------------------------------------------------------===//
// Per-token ops: softmax, sigmoid, add_bias, scale, topk, group_limit, bins, mask,
// bias_resident
//===----------------------------------------------------------------------===//

// -----

func.func @softmax_dynamic_experts(%x: tensor<?x?xf32>) -> tensor<?x?xf32> {
  // expected-error @+1 {{'moe.softmax' op input must have a static number of experts}}
  %p = moe.softmax %x : tensor<?x?xf32>
  return %p : tensor<?x?xf32>
}

// -----

moe.router @softmax_expert_count(%x: tensor<?x4xf32>) -> (out: tensor<?x4xf32>)
    attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.softmax' op input has 4 experts but the enclosing router has 8}}
  %p = moe.softmax %x : tensor<?x4xf32>
  moe.yield %p : tensor<?x4xf32>
}

// -----

moe.router @softmax_element_type(%x: tensor<?x8xf16>) -> (out: tensor<?x8xf16>)
    attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.softmax' op operand #0 must be 2D tensor of 32-bit float values, but got 'tensor<?x8xf16>'}}
  %p = moe.softmax %x : tensor<?x8xf16>
  moe.yield %p : tensor<?x8xf16>
}

// -----

moe.router @sigmoid_expert_count(%x: tensor<?x16xf32>) -> (out: tensor<?x16xf32>)
    attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.sigmoid' op input has 16 experts but the enclosing router has 8}}
  %p = moe.sigmoid %x : tensor<?x16xf32>
  moe.yield %p : tensor<?x16xf32>
}

// -----

moe.router @add_bias_expert_count(%x: tensor<?x4xf32>, %bias: tensor<4xf32>)
    -> (out: tensor<?x4xf32>) attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.add_bias' op input has 4 experts but the enclosing router has 8}}
  %y = moe.add_bias %x, %bias : tensor<?x4xf32>, tensor<4xf32>
  moe.yield %y : tensor<?x4xf32>
}

// -----

moe.router @add_bias_size(%x: tensor<?x8xf32>, %bias: tensor<4xf32>)
    -> (out: tensor<?x8xf32>) attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.add_bias' op bias has 4 entries but the scores have 8 experts}}
  %y = moe.add_bias %x, %bias : tensor<?x8xf32>, tensor<4xf32>
  moe.yield %y : tensor<?x8xf32>
}

// -----

moe.router @scale_expert_count(%x: tensor<?x4xf32>) -> (out: tensor<?x4xf32>)
    attributes {experts = 8, top_k = 2} {
  %f = moe.knob "inv_temperature" = 0.5 : f32
  // expected-error @+1 {{'moe.scale' op input has 4 experts but the enclosing router has 8}}
  %y = moe.scale %x, %f : tensor<?x4xf32>
  moe.yield %y : tensor<?x4xf32>
}

// -----

moe.router @scale_zero(%x: tensor<?x8xf32>) -> (out: tensor<?x8xf32>)
    attributes {experts = 8, top_k = 2} {
  %f = moe.knob "inv_temperature" = 0.0 : f32
  // expected-error @+1 {{'moe.scale' op factor must be non-zero (it would erase every score)}}
  %y = moe.scale %x, %f : tensor<?x8xf32>
  moe.yield %y : tensor<?x8xf32>
}

// -----

moe.router @scale_infinite(%x: tensor<?x8xf32>) -> (out: tensor<?x8xf32>)
    attributes {experts = 8, top_k = 2} {
  %f = arith.constant 0x7F800000 : f32
  // expected-error @+1 {{'moe.scale' op factor must be finite, got INF}}
  %y = moe.scale %x, %f : tensor<?x8xf32>
  moe.yield %y : tensor<?x8xf32>
}

// -----

moe.router @topk_expert_count(%x: tensor<?x4xf32>) -> (out: tensor<?x2xi32>)
    attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.topk' op input has 4 experts but the enclosing router has 8}}
  %v, %i = moe.topk %x k = 2 : tensor<?x4xf32> -> tensor<?x2xf32>, tensor<?x2xi32>
  moe.yield %i : tensor<?x2xi32>
}

// -----

moe.router @topk_k_zero(%x: tensor<?x8xf32>) -> (out: tensor<?x0xi32>)
    attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.topk' op k must be in [1, 8], got 0}}
  %v, %i = moe.topk %x k = 0 : tensor<?x8xf32> -> tensor<?x0xf32>, tensor<?x0xi32>
  moe.yield %i : tensor<?x0xi32>
}

// -----

moe.router @topk_k_too_large(%x: tensor<?x8xf32>) -> (out: tensor<?x9xi32>)
    attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.topk' op k must be in [1, 8], got 9}}
  %v, %i = moe.topk %x k = 9 : tensor<?x8xf32> -> tensor<?x9xf32>, tensor<?x9xi32>
  moe.yield %i : tensor<?x9xi32>
}

// -----

moe.router @topk_values_columns(%x: tensor<?x8xf32>) -> (out: tensor<?x2xi32>)
    attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.topk' op values must have k = 2 columns, got type 'tensor<?x3xf32>'}}
  %v, %i = moe.topk %x k = 2 : tensor<?x8xf32> -> tensor<?x3xf32>, tensor<?x2xi32>
  moe.yield %i : tensor<?x2xi32>
}

// -----

moe.router @topk_indices_columns(%x: tensor<?x8xf32>) -> (out: tensor<?x3xi32>)
    attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.topk' op indices must have k = 2 columns, got type 'tensor<?x3xi32>'}}
  %v, %i = moe.topk %x k = 2 : tensor<?x8xf32> -> tensor<?x2xf32>, tensor<?x3xi32>
  moe.yield %i : tensor<?x3xi32>
}

// -----

moe.router @topk_tokens(%x: tensor<4x8xf32>) -> (out: tensor<4x2xi32>)
    attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.topk' op input has 4 tokens but values has 3}}
  %v, %i = moe.topk %x k = 2 : tensor<4x8xf32> -> tensor<3x2xf32>, tensor<4x2xi32>
  moe.yield %i : tensor<4x2xi32>
}

// -----

moe.router @topk_index_tokens(%x: tensor<4x8xf32>) -> (out: tensor<5x2xi32>)
    attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.topk' op input has 4 tokens but indices has 5}}
  %v, %i = moe.topk %x k = 2 : tensor<4x8xf32> -> tensor<4x2xf32>, tensor<5x2xi32>
  moe.yield %i : tensor<5x2xi32>
}

// -----

moe.router @group_limit_expert_count(%x: tensor<?x4xf32>) -> (out: tensor<?x4xf32>)
    attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.group_limit' op input has 4 experts but the enclosing router has 8}}
  %y = moe.group_limit %x groups = 2 keep = 1 : tensor<?x4xf32>
  moe.yield %y : tensor<?x4xf32>
}

// -----

moe.router @group_limit_no_groups(%x: tensor<?x8xf32>) -> (out: tensor<?x8xf32>)
    attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.group_limit' op groups must be >= 1, got 0}}
  %y = moe.group_limit %x groups = 0 keep = 1 : tensor<?x8xf32>
  moe.yield %y : tensor<?x8xf32>
}

// -----

moe.router @group_limit_not_dividing(%x: tensor<?x8xf32>) -> (out: tensor<?x8xf32>)
    attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.group_limit' op groups (3) must divide the number of experts (8)}}
  %y = moe.group_limit %x groups = 3 keep = 1 : tensor<?x8xf32>
  moe.yield %y : tensor<?x8xf32>
}

// -----

moe.router @group_limit_keep_zero(%x: tensor<?x8xf32>) -> (out: tensor<?x8xf32>)
    attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.group_limit' op keep (topk_groups) must be in [1, groups = 4], got 0}}
  %y = moe.group_limit %x groups = 4 keep = 0 : tensor<?x8xf32>
  moe.yield %y : tensor<?x8xf32>
}

// -----

moe.router @group_limit_keep_too_many(%x: tensor<?x8xf32>) -> (out: tensor<?x8xf32>)
    attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.group_limit' op keep (topk_groups) must be in [1, groups = 4], got 5}}
  %y = moe.group_limit %x groups = 4 keep = 5 : tensor<?x8xf32>
  moe.yield %y : tensor<?x8xf32>
}

// -----

// The default group_topk = 2 is too many for groups of one expert.
moe.router @group_limit_default_group_topk(%x: tensor<?x8xf32>) -> (out: tensor<?x8xf32>)
    attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.group_limit' op group_topk must be in [1, experts per group = 1], got 2}}
  %y = moe.group_limit %x groups = 8 keep = 4 : tensor<?x8xf32>
  moe.yield %y : tensor<?x8xf32>
}

// -----

moe.router @group_limit_group_topk(%x: tensor<?x8xf32>) -> (out: tensor<?x8xf32>)
    attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.group_limit' op group_topk must be in [1, experts per group = 2], got 3}}
  %y = moe.group_limit %x groups = 4 keep = 2 group_topk = 3 : tensor<?x8xf32>
  moe.yield %y : tensor<?x8xf32>
}

// -----

moe.router @bins_expert_count(%x: tensor<?x4xf32>) -> (out: tensor<?x4xi32>)
    attributes {experts = 8, top_k = 2} {
  %alpha = moe.knob "alpha" = 2.0 : f32
  %beta = moe.knob "beta" = 4 : i64
  // expected-error @+1 {{'moe.bins' op logits has 4 experts but the enclosing router has 8}}
  %b = moe.bins %x, %alpha, %beta : tensor<?x4xf32> -> tensor<?x4xi32>
  moe.yield %b : tensor<?x4xi32>
}

// -----

moe.router @bins_shape(%x: tensor<?x8xf32>) -> (out: tensor<4x8xi32>)
    attributes {experts = 8, top_k = 2} {
  %alpha = moe.knob "alpha" = 2.0 : f32
  %beta = moe.knob "beta" = 4 : i64
  // expected-error @+1 {{'moe.bins' op bins must have the shape of the logits, got 'tensor<4x8xi32>' for 'tensor<?x8xf32>'}}
  %b = moe.bins %x, %alpha, %beta : tensor<?x8xf32> -> tensor<4x8xi32>
  moe.yield %b : tensor<4x8xi32>
}

// -----

moe.router @bins_element_type(%x: tensor<?x8xf32>) -> (out: tensor<?x8xf32>)
    attributes {experts = 8, top_k = 2} {
  %alpha = moe.knob "alpha" = 2.0 : f32
  %beta = moe.knob "beta" = 4 : i64
  // expected-error @+1 {{'moe.bins' op result #0 must be 2D tensor of 32-bit signless integer values, but got 'tensor<?x8xf32>'}}
  %b = moe.bins %x, %alpha, %beta : tensor<?x8xf32> -> tensor<?x8xf32>
  moe.yield %b : tensor<?x8xf32>
}

// -----

moe.router @bins_alpha_infinite(%x: tensor<?x8xf32>) -> (out: tensor<?x8xi32>)
    attributes {experts = 8, top_k = 2} {
  %alpha = arith.constant 0x7F800000 : f32
  %beta = moe.knob "beta" = 4 : i64
  // expected-error @+1 {{'moe.bins' op alpha must be finite, got INF}}
  %b = moe.bins %x, %alpha, %beta : tensor<?x8xf32> -> tensor<?x8xi32>
  moe.yield %b : tensor<?x8xi32>
}

// -----

moe.router @bins_alpha_zero(%x: tensor<?x8xf32>) -> (out: tensor<?x8xi32>)
    attributes {experts = 8, top_k = 2} {
  %alpha = moe.knob "alpha" = 0.0 : f32
  %beta = moe.knob "beta" = 4 : i64
  // expected-error @+1 {{'moe.bins' op alpha must be > 0, got 0.000000e+00}}
  %b = moe.bins %x, %alpha, %beta : tensor<?x8xf32> -> tensor<?x8xi32>
  moe.yield %b : tensor<?x8xi32>
}

// -----

moe.router @bins_alpha_negative(%x: tensor<?x8xf32>) -> (out: tensor<?x8xi32>)
    attributes {experts = 8, top_k = 2} {
  %alpha = arith.constant -2.0 : f32
  %beta = moe.knob "beta" = 4 : i64
  // expected-error @+1 {{'moe.bins' op alpha must be > 0, got -2.000000e+00}}
  %b = moe.bins %x, %alpha, %beta : tensor<?x8xf32> -> tensor<?x8xi32>
  moe.yield %b : tensor<?x8xi32>
}

// -----

moe.router @bins_beta_negative(%x: tensor<?x8xf32>) -> (out: tensor<?x8xi32>)
    attributes {experts = 8, top_k = 2} {
  %alpha = moe.knob "alpha" = 2.0 : f32
  %beta = arith.constant -1 : i64
  // expected-error @+1 {{'moe.bins' op beta must be in [0, inf], got -1}}
  %b = moe.bins %x, %alpha, %beta : tensor<?x8xf32> -> tensor<?x8xi32>
  moe.yield %b : tensor<?x8xi32>
}

// -----

moe.router @mask_expert_count(%x: tensor<?x4xf32>, %s: !moe.set<8>)
    -> (out: tensor<?x4xf32>) attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.mask' op input has 4 experts but the enclosing router has 8}}
  %y = moe.mask %x, %s : tensor<?x4xf32>, !moe.set<8>
  moe.yield %y : tensor<?x4xf32>
}

// -----

func.func @mask_set_size(%x: tensor<?x8xf32>, %s: !moe.set<4>) {
  // expected-error @+1 {{'moe.mask' op set is a set of 4 experts, expected 8}}
  %y = moe.mask %x, %s : tensor<?x8xf32>, !moe.set<4>
  return
}

// -----

moe.router @bias_resident_expert_count(%x: tensor<?x4xf32>, %resident: !moe.set<8>)
    -> (out: tensor<?x4xf32>) attributes {experts = 8, top_k = 2} {
  %bonus = moe.knob "resident_bonus" = 0.05 : f32
  // expected-error @+1 {{'moe.bias_resident' op input has 4 experts but the enclosing router has 8}}
  %y = moe.bias_resident %x, %resident, %bonus : tensor<?x4xf32>, !moe.set<8>
  moe.yield %y : tensor<?x4xf32>
}

// -----

func.func @bias_resident_set_size(%x: tensor<?x8xf32>, %resident: !moe.set<16>) {
  %bonus = arith.constant 0.05 : f32
  // expected-error @+1 {{'moe.bias_resident' op resident is a set of 16 experts, expected 8}}
  %y = moe.bias_resident %x, %resident, %bonus : tensor<?x8xf32>, !moe.set<16>
  return
}

// -----

moe.router @bias_resident_nan_bonus(%x: tensor<?x8xf32>, %resident: !moe.set<8>)
    -> (out: tensor<?x8xf32>) attributes {experts = 8, top_k = 2} {
  %bonus = arith.constant 0x7FC00000 : f32
  // expected-error @+1 {{'moe.bias_resident' op bonus must be finite, got nan}}
  %y = moe.bias_resident %x, %resident, %bonus : tensor<?x8xf32>, !moe.set<8>
  moe.yield %y : tensor<?x8xf32>
}

// -----

moe.router @bias_resident_negative_bonus(%x: tensor<?x8xf32>, %resident: !moe.set<8>)
    -> (out: tensor<?x8xf32>) attributes {experts = 8, top_k = 2} {
  %bonus = moe.knob "resident_bonus" = -0.5 : f32
  // expected-error @+1 {{'moe.bias_resident' op bonus must be >= 0, got -5.000000e-01}}
  %y = moe.bias_resident %x, %resident, %bonus : tensor<?x8xf32>, !moe.set<8>
  moe.yield %y : tensor<?x8xf32>
}

//===----------------------------------------------------------------------===//
// Batch reductions: batch_reduce, segment_reduce, bin_score
//===----------------------------------------------------------------------===//

// -----

moe.router @batch_reduce_expert_count(%x: tensor<?x4xf32>) -> (out: tensor<4xf32>)
    attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.batch_reduce' op input has 4 experts but the enclosing router has 8}}
  %m = moe.batch_reduce sum %x : tensor<?x4xf32> -> tensor<4xf32>
  moe.yield %m : tensor<4xf32>
}

// -----

moe.router @batch_reduce_result_size(%x: tensor<?x8xf32>) -> (out: tensor<4xf32>)
    attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.batch_reduce' op result must have one entry per expert (8), got 'tensor<4xf32>'}}
  %m = moe.batch_reduce sum %x : tensor<?x8xf32> -> tensor<4xf32>
  moe.yield %m : tensor<4xf32>
}

// -----

moe.router @batch_reduce_sum_type(%x: tensor<?x8xf32>) -> (out: tensor<8xi32>)
    attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.batch_reduce' op a 'sum' reduction yields 'f32' elements, got 'tensor<8xi32>'}}
  %m = moe.batch_reduce sum %x : tensor<?x8xf32> -> tensor<8xi32>
  moe.yield %m : tensor<8xi32>
}

// -----

moe.router @batch_reduce_count_type(%x: tensor<?x8xf32>) -> (out: tensor<8xf32>)
    attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.batch_reduce' op a 'count' reduction yields 'i32' elements, got 'tensor<8xf32>'}}
  %m = moe.batch_reduce count %x over topk = 2 : tensor<?x8xf32> -> tensor<8xf32>
  moe.yield %m : tensor<8xf32>
}

// -----

moe.router @batch_reduce_count_without_topk(%x: tensor<?x8xf32>) -> (out: tensor<8xi32>)
    attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.batch_reduce' op 'count' needs 'over topk = k' to say which entries count}}
  %m = moe.batch_reduce count %x : tensor<?x8xf32> -> tensor<8xi32>
  moe.yield %m : tensor<8xi32>
}

// -----

moe.router @batch_reduce_topk_zero(%x: tensor<?x8xf32>) -> (out: tensor<8xf32>)
    attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.batch_reduce' op topk must be in [1, 8], got 0}}
  %m = moe.batch_reduce max %x over topk = 0 : tensor<?x8xf32> -> tensor<8xf32>
  moe.yield %m : tensor<8xf32>
}

// -----

moe.router @batch_reduce_topk_too_large(%x: tensor<?x8xf32>) -> (out: tensor<8xi32>)
    attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.batch_reduce' op topk must be in [1, 8], got 9}}
  %m = moe.batch_reduce count %x over topk = 9 : tensor<?x8xf32> -> tensor<8xi32>
  moe.yield %m : tensor<8xi32>
}

// -----

moe.router @segment_reduce_expert_count(%x: tensor<?x4xf32>, %request_ids: tensor<?xi32>)
    -> (out: tensor<?x4xf32>) attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.segment_reduce' op input has 4 experts but the enclosing router has 8}}
  %y = moe.segment_reduce sum %x by %request_ids : tensor<?x4xf32>, tensor<?xi32>
  moe.yield %y : tensor<?x4xf32>
}

// -----

moe.router @segment_reduce_tokens(%x: tensor<4x8xf32>, %request_ids: tensor<3xi32>)
    -> (out: tensor<4x8xf32>) attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.segment_reduce' op input has 4 tokens but request_ids has 3}}
  %y = moe.segment_reduce max %x by %request_ids : tensor<4x8xf32>, tensor<3xi32>
  moe.yield %y : tensor<4x8xf32>
}

// -----

moe.router @segment_reduce_count(%x: tensor<?x8xf32>, %request_ids: tensor<?xi32>)
    -> (out: tensor<?x8xf32>) attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.segment_reduce' op 'count' is not a segment reduction (use 'sum' of a 0/1 matrix)}}
  %y = moe.segment_reduce count %x by %request_ids : tensor<?x8xf32>, tensor<?xi32>
  moe.yield %y : tensor<?x8xf32>
}

// -----

moe.router @bin_score_expert_count(%bins: tensor<?x4xi32>, %ids: tensor<?x2xi32>)
    -> (out: tensor<4xf32>) attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.bin_score' op bins has 4 experts but the enclosing router has 8}}
  %s = moe.bin_score %bins, %ids : tensor<?x4xi32>, tensor<?x2xi32> -> tensor<4xf32>
  moe.yield %s : tensor<4xf32>
}

// -----

func.func @bin_score_dynamic_k(%bins: tensor<?x8xi32>, %ids: tensor<?x?xi32>) -> tensor<8xf32> {
  // expected-error @+1 {{'moe.bin_score' op ids must have a static number of choices per token}}
  %s = moe.bin_score %bins, %ids : tensor<?x8xi32>, tensor<?x?xi32> -> tensor<8xf32>
  return %s : tensor<8xf32>
}

// -----

moe.router @bin_score_tokens(%bins: tensor<4x8xi32>, %ids: tensor<2x2xi32>)
    -> (out: tensor<8xf32>) attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.bin_score' op bins has 4 tokens but ids has 2}}
  %s = moe.bin_score %bins, %ids : tensor<4x8xi32>, tensor<2x2xi32> -> tensor<8xf32>
  moe.yield %s : tensor<8xf32>
}

// -----

moe.router @bin_score_result_size(%bins: tensor<?x8xi32>, %ids: tensor<?x2xi32>)
    -> (out: tensor<?xf32>) attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.bin_score' op result must have one entry per expert (8), got 'tensor<?xf32>'}}
  %s = moe.bin_score %bins, %ids : tensor<?x8xi32>, tensor<?x2xi32> -> tensor<?xf32>
  moe.yield %s : tensor<?xf32>
}

// -----

moe.router @bin_score_too_many_choices(%bins: tensor<?x8xi32>, %ids: tensor<?x9xi32>)
    -> (out: tensor<8xf32>) attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.bin_score' op ids hold 9 choices per token but there are only 8 experts}}
  %s = moe.bin_score %bins, %ids : tensor<?x8xi32>, tensor<?x9xi32> -> tensor<8xf32>
  moe.yield %s : tensor<8xf32>
}

//===----------------------------------------------------------------------===//
// Expert sets: union_topk, fill, fill_per_device, segment_fill, threshold_set,
// drop_lowest, confident_top1, union / intersect
//===----------------------------------------------------------------------===//

// -----

moe.router @union_topk_expert_count(%x: tensor<?x4xf32>) -> (out: tensor<?x4xf32>)
    attributes {experts = 8, top_k = 2} {
  %k0 = moe.knob "k0" = 1 : i64
  // expected-error @+1 {{'moe.union_topk' op scores has 4 experts but the enclosing router has 8}}
  %s = moe.union_topk %x, %k0 : tensor<?x4xf32> -> !moe.set<8>
  moe.yield %x : tensor<?x4xf32>
}

// -----

func.func @union_topk_set_size(%x: tensor<?x8xf32>) {
  %k0 = arith.constant 1 : i64
  // expected-error @+1 {{'moe.union_topk' op result is a set of 4 experts, expected 8}}
  %s = moe.union_topk %x, %k0 : tensor<?x8xf32> -> !moe.set<4>
  return
}

// -----

moe.router @union_topk_k0_too_large(%x: tensor<?x8xf32>) -> (out: !moe.set<8>)
    attributes {experts = 8, top_k = 2} {
  %k0 = moe.knob "k0" = 9 : i64
  // expected-error @+1 {{'moe.union_topk' op k0 must be in [0, 8], got 9}}
  %s = moe.union_topk %x, %k0 : tensor<?x8xf32> -> !moe.set<8>
  moe.yield %s : !moe.set<8>
}

// -----

moe.router @union_topk_k0_negative(%x: tensor<?x8xf32>) -> (out: !moe.set<8>)
    attributes {experts = 8, top_k = 2} {
  %k0 = arith.constant -1 : i64
  // expected-error @+1 {{'moe.union_topk' op k0 must be in [0, 8], got -1}}
  %s = moe.union_topk %x, %k0 : tensor<?x8xf32> -> !moe.set<8>
  moe.yield %s : !moe.set<8>
}

// -----

moe.router @fill_expert_count(%init: !moe.set<8>, %mass: tensor<4xf32>)
    -> (out: !moe.set<8>) attributes {experts = 8, top_k = 2} {
  %m = moe.knob "budget" = 2 : i64
  // expected-error @+1 {{'moe.fill' op scores has 4 experts but the enclosing router has 8}}
  %s = moe.fill %init with %mass budget(%m : i64) : tensor<4xf32> -> !moe.set<8>
  moe.yield %s : !moe.set<8>
}

// -----

func.func @fill_dynamic_experts(%init: !moe.set<8>, %mass: tensor<?xf32>) {
  %m = arith.constant 2 : i64
  // expected-error @+1 {{'moe.fill' op scores must have a static number of experts}}
  %s = moe.fill %init with %mass budget(%m : i64) : tensor<?xf32> -> !moe.set<8>
  return
}

// -----

func.func @fill_init_size(%init: !moe.set<4>, %mass: tensor<8xf32>) {
  %m = arith.constant 2 : i64
  // expected-error @+1 {{'moe.fill' op init is a set of 4 experts, expected 8}}
  %s = moe.fill %init with %mass budget(%m : i64) : tensor<8xf32> -> !moe.set<4>
  return
}

// -----

moe.router @fill_budget_type(%init: !moe.set<8>, %mass: tensor<8xf32>)
    -> (out: !moe.set<8>) attributes {experts = 8, top_k = 2} {
  %m = moe.knob "budget" = 2.0 : f32
  // expected-error @+1 {{'moe.fill' op a 'budget' fill takes an i64 number of experts, got 'f32'}}
  %s = moe.fill %init with %mass budget(%m : f32) : tensor<8xf32> -> !moe.set<8>
  moe.yield %s : !moe.set<8>
}

// -----

moe.router @fill_min_size_type(%init: !moe.set<8>, %mass: tensor<8xf32>)
    -> (out: !moe.set<8>) attributes {experts = 8, top_k = 2} {
  %n = moe.knob "min_size" = 2.0 : f32
  // expected-error @+1 {{'moe.fill' op a 'min_size' fill takes an i64 number of experts, got 'f32'}}
  %s = moe.fill %init with %mass min_size(%n : f32) : tensor<8xf32> -> !moe.set<8>
  moe.yield %s : !moe.set<8>
}

// -----

moe.router @fill_threshold_type(%init: !moe.set<8>, %mass: tensor<8xf32>)
    -> (out: !moe.set<8>) attributes {experts = 8, top_k = 2} {
  %tau = moe.knob "tau" = 1 : i64
  // expected-error @+1 {{'moe.fill' op a 'threshold' fill takes an f32 fraction of the mass, got 'i64'}}
  %s = moe.fill %init with %mass threshold(%tau : i64) : tensor<8xf32> -> !moe.set<8>
  moe.yield %s : !moe.set<8>
}

// -----

moe.router @fill_negative_budget(%init: !moe.set<8>, %mass: tensor<8xf32>)
    -> (out: !moe.set<8>) attributes {experts = 8, top_k = 2} {
  %m = arith.constant -3 : i64
  // expected-error @+1 {{'moe.fill' op budget must be in [0, inf], got -3}}
  %s = moe.fill %init with %mass budget(%m : i64) : tensor<8xf32> -> !moe.set<8>
  moe.yield %s : !moe.set<8>
}

// -----

moe.router @fill_min_size_too_large(%init: !moe.set<8>, %mass: tensor<8xf32>)
    -> (out: !moe.set<8>) attributes {experts = 8, top_k = 2} {
  %n = moe.knob "min_size" = 9 : i64
  // expected-error @+1 {{'moe.fill' op min_size must be in [0, 8], got 9}}
  %s = moe.fill %init with %mass min_size(%n : i64) : tensor<8xf32> -> !moe.set<8>
  moe.yield %s : !moe.set<8>
}

// -----

moe.router @fill_min_size_negative(%init: !moe.set<8>, %mass: tensor<8xf32>)
    -> (out: !moe.set<8>) attributes {experts = 8, top_k = 2} {
  %n = arith.constant -1 : i64
  // expected-error @+1 {{'moe.fill' op min_size must be in [0, 8], got -1}}
  %s = moe.fill %init with %mass min_size(%n : i64) : tensor<8xf32> -> !moe.set<8>
  moe.yield %s : !moe.set<8>
}

// -----

moe.router @fill_threshold_above_one(%init: !moe.set<8>, %mass: tensor<8xf32>)
    -> (out: !moe.set<8>) attributes {experts = 8, top_k = 2} {
  %tau = moe.knob "tau" = 1.5 : f32
  // expected-error @+1 {{'moe.fill' op threshold must be in [0, 1], got 1.500000e+00}}
  %s = moe.fill %init with %mass threshold(%tau : f32) : tensor<8xf32> -> !moe.set<8>
  moe.yield %s : !moe.set<8>
}

// -----

moe.router @fill_threshold_negative(%init: !moe.set<8>, %mass: tensor<8xf32>)
    -> (out: !moe.set<8>) attributes {experts = 8, top_k = 2} {
  %tau = arith.constant -0.25 : f32
  // expected-error @+1 {{'moe.fill' op threshold must be in [0, 1], got -2.500000e-01}}
  %s = moe.fill %init with %mass threshold(%tau : f32) : tensor<8xf32> -> !moe.set<8>
  moe.yield %s : !moe.set<8>
}

// -----

moe.router @fill_threshold_nan(%init: !moe.set<8>, %mass: tensor<8xf32>)
    -> (out: !moe.set<8>) attributes {experts = 8, top_k = 2} {
  %tau = arith.constant 0x7FC00000 : f32
  // expected-error @+1 {{'moe.fill' op threshold must be in [0, 1], got nan}}
  %s = moe.fill %init with %mass threshold(%tau : f32) : tensor<8xf32> -> !moe.set<8>
  moe.yield %s : !moe.set<8>
}

// -----

moe.router @fill_per_device_expert_count(%init: !moe.set<8>, %mass: tensor<4xf32>,
    %placement: !moe.placement<experts = 8, devices = 2, slots = 8>)
    -> (out: !moe.set<8>) attributes {experts = 8, top_k = 2} {
  %m = moe.knob "device_budget" = 1 : i64
  // expected-error @+1 {{'moe.fill_per_device' op scores has 4 experts but the enclosing router has 8}}
  %s = moe.fill_per_device %init with %mass on %placement budget(%m : i64)
      : tensor<4xf32>, !moe.placement<experts = 8, devices = 2, slots = 8> -> !moe.set<8>
  moe.yield %s : !moe.set<8>
}

// -----

func.func @fill_per_device_init_size(%init: !moe.set<4>, %mass: tensor<8xf32>,
    %placement: !moe.placement<experts = 8, devices = 2, slots = 8>) {
  %m = arith.constant 1 : i64
  // expected-error @+1 {{'moe.fill_per_device' op init is a set of 4 experts, expected 8}}
  %s = moe.fill_per_device %init with %mass on %placement budget(%m : i64)
      : tensor<8xf32>, !moe.placement<experts = 8, devices = 2, slots = 8> -> !moe.set<4>
  return
}

// -----

func.func @fill_per_device_placement_size(%init: !moe.set<8>, %mass: tensor<8xf32>,
    %placement: !moe.placement<experts = 4, devices = 2, slots = 8>) {
  %m = arith.constant 1 : i64
  // expected-error @+1 {{'moe.fill_per_device' op placement places 4 experts, expected 8}}
  %s = moe.fill_per_device %init with %mass on %placement budget(%m : i64)
      : tensor<8xf32>, !moe.placement<experts = 4, devices = 2, slots = 8> -> !moe.set<8>
  return
}

// -----

moe.router @fill_per_device_negative_budget(%init: !moe.set<8>, %mass: tensor<8xf32>,
    %placement: !moe.placement<experts = 8, devices = 2, slots = 8>)
    -> (out: !moe.set<8>) attributes {experts = 8, top_k = 2} {
  %m = arith.constant -1 : i64
  // expected-error @+1 {{'moe.fill_per_device' op budget must be in [0, inf], got -1}}
  %s = moe.fill_per_device %init with %mass on %placement budget(%m : i64)
      : tensor<8xf32>, !moe.placement<experts = 8, devices = 2, slots = 8> -> !moe.set<8>
  moe.yield %s : !moe.set<8>
}

// -----

moe.router @segment_fill_expert_count(%x: tensor<?x4xf32>, %request_ids: tensor<?xi32>)
    -> (out: !moe.set<8>) attributes {experts = 8, top_k = 2} {
  %k0 = moe.knob "k0" = 1 : i64
  %m = moe.knob "request_budget" = 2 : i64
  // expected-error @+1 {{'moe.segment_fill' op scores has 4 experts but the enclosing router has 8}}
  %s = moe.segment_fill %x by %request_ids warmup(%k0) budget(%m)
      : tensor<?x4xf32>, tensor<?xi32> -> !moe.set<8>
  moe.yield %s : !moe.set<8>
}

// -----

func.func @segment_fill_set_size(%x: tensor<?x8xf32>, %request_ids: tensor<?xi32>) {
  %k0 = arith.constant 1 : i64
  %m = arith.constant 2 : i64
  // expected-error @+1 {{'moe.segment_fill' op result is a set of 4 experts, expected 8}}
  %s = moe.segment_fill %x by %request_ids warmup(%k0) budget(%m)
      : tensor<?x8xf32>, tensor<?xi32> -> !moe.set<4>
  return
}

// -----

moe.router @segment_fill_tokens(%x: tensor<4x8xf32>, %request_ids: tensor<5xi32>)
    -> (out: !moe.set<8>) attributes {experts = 8, top_k = 2} {
  %k0 = moe.knob "k0" = 1 : i64
  %m = moe.knob "request_budget" = 2 : i64
  // expected-error @+1 {{'moe.segment_fill' op scores has 4 tokens but request_ids has 5}}
  %s = moe.segment_fill %x by %request_ids warmup(%k0) budget(%m)
      : tensor<4x8xf32>, tensor<5xi32> -> !moe.set<8>
  moe.yield %s : !moe.set<8>
}

// -----

moe.router @segment_fill_k0(%x: tensor<?x8xf32>, %request_ids: tensor<?xi32>)
    -> (out: !moe.set<8>) attributes {experts = 8, top_k = 2} {
  %k0 = moe.knob "k0" = 10 : i64
  %m = moe.knob "request_budget" = 2 : i64
  // expected-error @+1 {{'moe.segment_fill' op k0 must be in [0, 8], got 10}}
  %s = moe.segment_fill %x by %request_ids warmup(%k0) budget(%m)
      : tensor<?x8xf32>, tensor<?xi32> -> !moe.set<8>
  moe.yield %s : !moe.set<8>
}

// -----

moe.router @segment_fill_budget(%x: tensor<?x8xf32>, %request_ids: tensor<?xi32>)
    -> (out: !moe.set<8>) attributes {experts = 8, top_k = 2} {
  %k0 = moe.knob "k0" = 1 : i64
  %m = arith.constant -2 : i64
  // expected-error @+1 {{'moe.segment_fill' op budget must be in [0, inf], got -2}}
  %s = moe.segment_fill %x by %request_ids warmup(%k0) budget(%m)
      : tensor<?x8xf32>, tensor<?xi32> -> !moe.set<8>
  moe.yield %s : !moe.set<8>
}

// -----

moe.router @threshold_set_expert_count(%score: tensor<4xf32>) -> (out: !moe.set<8>)
    attributes {experts = 8, top_k = 2} {
  %theta = moe.knob "theta" = 1.0 : f32
  // expected-error @+1 {{'moe.threshold_set' op scores has 4 experts but the enclosing router has 8}}
  %s = moe.threshold_set %score, %theta : tensor<4xf32> -> !moe.set<8>
  moe.yield %s : !moe.set<8>
}

// -----

func.func @threshold_set_size(%score: tensor<8xf32>) {
  %theta = arith.constant 1.0 : f32
  // expected-error @+1 {{'moe.threshold_set' op result is a set of 16 experts, expected 8}}
  %s = moe.threshold_set %score, %theta : tensor<8xf32> -> !moe.set<16>
  return
}

// -----

moe.router @threshold_set_nan(%score: tensor<8xf32>) -> (out: !moe.set<8>)
    attributes {experts = 8, top_k = 2} {
  %theta = arith.constant 0x7FC00000 : f32
  // expected-error @+1 {{'moe.threshold_set' op theta must not be NaN}}
  %s = moe.threshold_set %score, %theta : tensor<8xf32> -> !moe.set<8>
  moe.yield %s : !moe.set<8>
}

// -----

moe.router @drop_lowest_expert_count(%set: !moe.set<8>, %score: tensor<4xf32>)
    -> (out: !moe.set<8>) attributes {experts = 8, top_k = 2} {
  %n = moe.knob "drop" = 1 : i64
  // expected-error @+1 {{'moe.drop_lowest' op scores has 4 experts but the enclosing router has 8}}
  %s = moe.drop_lowest %set by %score, %n : tensor<4xf32> -> !moe.set<8>
  moe.yield %s : !moe.set<8>
}

// -----

func.func @drop_lowest_set_size(%set: !moe.set<4>, %score: tensor<8xf32>) {
  %n = arith.constant 1 : i64
  // expected-error @+1 {{'moe.drop_lowest' op set is a set of 4 experts, expected 8}}
  %s = moe.drop_lowest %set by %score, %n : tensor<8xf32> -> !moe.set<4>
  return
}

// -----

moe.router @drop_lowest_negative(%set: !moe.set<8>, %score: tensor<8xf32>)
    -> (out: !moe.set<8>) attributes {experts = 8, top_k = 2} {
  %n = moe.knob "drop" = -1 : i64
  // expected-error @+1 {{'moe.drop_lowest' op count must be in [0, inf], got -1}}
  %s = moe.drop_lowest %set by %score, %n : tensor<8xf32> -> !moe.set<8>
  moe.yield %s : !moe.set<8>
}

// -----

moe.router @confident_top1_expert_count(%bins: tensor<?x4xi32>, %ids: tensor<?x2xi32>)
    -> (out: !moe.set<8>) attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.confident_top1' op bins has 4 experts but the enclosing router has 8}}
  %s = moe.confident_top1 %bins, %ids : tensor<?x4xi32>, tensor<?x2xi32> -> !moe.set<8>
  moe.yield %s : !moe.set<8>
}

// -----

func.func @confident_top1_set_size(%bins: tensor<?x8xi32>, %ids: tensor<?x2xi32>) {
  // expected-error @+1 {{'moe.confident_top1' op result is a set of 4 experts, expected 8}}
  %s = moe.confident_top1 %bins, %ids : tensor<?x8xi32>, tensor<?x2xi32> -> !moe.set<4>
  return
}

// -----

moe.router @confident_top1_tokens(%bins: tensor<4x8xi32>, %ids: tensor<3x2xi32>)
    -> (out: !moe.set<8>) attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.confident_top1' op bins has 4 tokens but ids has 3}}
  %s = moe.confident_top1 %bins, %ids : tensor<4x8xi32>, tensor<3x2xi32> -> !moe.set<8>
  moe.yield %s : !moe.set<8>
}

// -----

func.func @confident_top1_dynamic_k(%bins: tensor<?x8xi32>, %ids: tensor<?x?xi32>) -> !moe.set<8> {
  // expected-error @+1 {{'moe.confident_top1' op ids must have a static number of choices per token}}
  %s = moe.confident_top1 %bins, %ids : tensor<?x8xi32>, tensor<?x?xi32> -> !moe.set<8>
  return %s : !moe.set<8>
}

// -----

moe.router @confident_top1_one_choice(%bins: tensor<?x8xi32>, %ids: tensor<?x1xi32>)
    -> (out: !moe.set<8>) attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.confident_top1' op ids must hold at least 2 choices per token to compare the second choice's bin, got 1}}
  %s = moe.confident_top1 %bins, %ids : tensor<?x8xi32>, tensor<?x1xi32> -> !moe.set<8>
  moe.yield %s : !moe.set<8>
}

// -----

moe.router @confident_top1_too_many_choices(%bins: tensor<?x8xi32>, %ids: tensor<?x9xi32>)
    -> (out: !moe.set<8>) attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.confident_top1' op ids hold 9 choices per token but there are only 8 experts}}
  %s = moe.confident_top1 %bins, %ids : tensor<?x8xi32>, tensor<?x9xi32> -> !moe.set<8>
  moe.yield %s : !moe.set<8>
}

// -----

// The custom syntax of union / intersect names one type; the generic form can mix.
func.func @union_mixed_sizes(%a: !moe.set<8>, %b: !moe.set<4>) {
  // expected-error @+1 {{'moe.union' op requires the same type for all operands and results}}
  %s = "moe.union"(%a, %b) : (!moe.set<8>, !moe.set<4>) -> !moe.set<8>
  return
}

//===----------------------------------------------------------------------===//
// Routing outputs: route, remap_physical, expert_counts
//===----------------------------------------------------------------------===//

// -----

moe.router @route_expert_count(%logits: tensor<?x4xf32>)
    -> (topk_ids: tensor<?x2xi32>, topk_weights: tensor<?x2xf32>)
    attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.route' op scores has 4 experts but the enclosing router has 8}}
  %ids, %w = moe.route %logits k = 2 : tensor<?x4xf32> -> tensor<?x2xi32>, tensor<?x2xf32>
  moe.yield %ids, %w : tensor<?x2xi32>, tensor<?x2xf32>
}

// -----

func.func @route_within_size(%logits: tensor<?x8xf32>, %sel: !moe.set<4>) {
  // expected-error @+1 {{'moe.route' op within is a set of 4 experts, expected 8}}
  %ids, %w = moe.route %logits within %sel k = 2
      : tensor<?x8xf32>, !moe.set<4> -> tensor<?x2xi32>, tensor<?x2xf32>
  return
}

// -----

moe.router @route_weights_type(%logits: tensor<4x8xf32>, %scores: tensor<?x8xf32>)
    -> (topk_ids: tensor<4x2xi32>, topk_weights: tensor<4x2xf32>)
    attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.route' op weights must have the type of the scores ('tensor<4x8xf32>'), got 'tensor<?x8xf32>'}}
  %ids, %w = moe.route %logits weights(%scores : tensor<?x8xf32>) k = 2
      : tensor<4x8xf32> -> tensor<4x2xi32>, tensor<4x2xf32>
  moe.yield %ids, %w : tensor<4x2xi32>, tensor<4x2xf32>
}

// -----

moe.router @route_k_zero(%logits: tensor<?x8xf32>)
    -> (topk_ids: tensor<?x0xi32>, topk_weights: tensor<?x0xf32>)
    attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.route' op k must be in [1, 8], got 0}}
  %ids, %w = moe.route %logits k = 0 : tensor<?x8xf32> -> tensor<?x0xi32>, tensor<?x0xf32>
  moe.yield %ids, %w : tensor<?x0xi32>, tensor<?x0xf32>
}

// -----

func.func @route_k_too_large(%logits: tensor<?x8xf32>) {
  // expected-error @+1 {{'moe.route' op k must be in [1, 8], got 9}}
  %ids, %w = moe.route %logits k = 9 : tensor<?x8xf32> -> tensor<?x9xi32>, tensor<?x9xf32>
  return
}

// -----

moe.router @route_k_vs_top_k(%logits: tensor<?x8xf32>)
    -> (topk_ids: tensor<?x4xi32>, topk_weights: tensor<?x4xf32>)
    attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.route' op routes to k = 4 experts but router @route_k_vs_top_k has top_k = 2}}
  %ids, %w = moe.route %logits k = 4 : tensor<?x8xf32> -> tensor<?x4xi32>, tensor<?x4xf32>
  moe.yield %ids, %w : tensor<?x4xi32>, tensor<?x4xf32>
}

// -----

// The top_k check also reaches into phase-gate regions.
moe.router @route_k_vs_top_k_gated(%logits: tensor<?x8xf32>)
    -> (topk_ids: tensor<?x2xi32>, topk_weights: tensor<?x2xf32>)
    attributes {experts = 8, top_k = 2} {
  %ids, %w = moe.when %logits : tensor<?x8xf32> max_tokens = 64
      -> (tensor<?x2xi32>, tensor<?x2xf32>) {
    // expected-error @+1 {{'moe.route' op routes to k = 1 experts but router @route_k_vs_top_k_gated has top_k = 2}}
    %i1, %w1 = moe.route %logits k = 1 : tensor<?x8xf32> -> tensor<?x1xi32>, tensor<?x1xf32>
    %i2, %w2 = moe.route %logits k = 2 : tensor<?x8xf32> -> tensor<?x2xi32>, tensor<?x2xf32>
    moe.yield %i2, %w2 : tensor<?x2xi32>, tensor<?x2xf32>
  } else {
    %i2, %w2 = moe.route %logits k = 2 : tensor<?x8xf32> -> tensor<?x2xi32>, tensor<?x2xf32>
    moe.yield %i2, %w2 : tensor<?x2xi32>, tensor<?x2xf32>
  }
  moe.yield %ids, %w : tensor<?x2xi32>, tensor<?x2xf32>
}

// -----

moe.router @route_ids_columns(%logits: tensor<?x8xf32>)
    -> (topk_ids: tensor<?x3xi32>, topk_weights: tensor<?x2xf32>)
    attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.route' op topk_ids must have k = 2 columns, got 'tensor<?x3xi32>'}}
  %ids, %w = moe.route %logits k = 2 : tensor<?x8xf32> -> tensor<?x3xi32>, tensor<?x2xf32>
  moe.yield %ids, %w : tensor<?x3xi32>, tensor<?x2xf32>
}

// -----

moe.router @route_weights_columns(%logits: tensor<?x8xf32>)
    -> (topk_ids: tensor<?x2xi32>, topk_weights: tensor<?x8xf32>)
    attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.route' op topk_weights must have k = 2 columns, got 'tensor<?x8xf32>'}}
  %ids, %w = moe.route %logits k = 2 : tensor<?x8xf32> -> tensor<?x2xi32>, tensor<?x8xf32>
  moe.yield %ids, %w : tensor<?x2xi32>, tensor<?x8xf32>
}

// -----

moe.router @route_ids_tokens(%logits: tensor<4x8xf32>)
    -> (topk_ids: tensor<2x2xi32>, topk_weights: tensor<4x2xf32>)
    attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.route' op scores has 4 tokens but topk_ids has 2}}
  %ids, %w = moe.route %logits k = 2 : tensor<4x8xf32> -> tensor<2x2xi32>, tensor<4x2xf32>
  moe.yield %ids, %w : tensor<2x2xi32>, tensor<4x2xf32>
}

// -----

moe.router @route_weights_tokens(%logits: tensor<4x8xf32>)
    -> (topk_ids: tensor<4x2xi32>, topk_weights: tensor<8x2xf32>)
    attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.route' op scores has 4 tokens but topk_weights has 8}}
  %ids, %w = moe.route %logits k = 2 : tensor<4x8xf32> -> tensor<4x2xi32>, tensor<8x2xf32>
  moe.yield %ids, %w : tensor<4x2xi32>, tensor<8x2xf32>
}

// -----

moe.router @route_scaling_zero(%logits: tensor<?x8xf32>)
    -> (topk_ids: tensor<?x2xi32>, topk_weights: tensor<?x2xf32>)
    attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.route' op scaling must be finite and > 0, got 0.000000e+00}}
  %ids, %w = moe.route %logits k = 2 scaling = 0.0
      : tensor<?x8xf32> -> tensor<?x2xi32>, tensor<?x2xf32>
  moe.yield %ids, %w : tensor<?x2xi32>, tensor<?x2xf32>
}

// -----

moe.router @route_scaling_negative(%logits: tensor<?x8xf32>)
    -> (topk_ids: tensor<?x2xi32>, topk_weights: tensor<?x2xf32>)
    attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.route' op scaling must be finite and > 0, got -2.500000e+00}}
  %ids, %w = moe.route %logits k = 2 renormalize scaling = -2.5
      : tensor<?x8xf32> -> tensor<?x2xi32>, tensor<?x2xf32>
  moe.yield %ids, %w : tensor<?x2xi32>, tensor<?x2xf32>
}

// -----

moe.router @route_scaling_infinite(%logits: tensor<?x8xf32>)
    -> (topk_ids: tensor<?x2xi32>, topk_weights: tensor<?x2xf32>)
    attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.route' op scaling must be finite and > 0, got INF}}
  %ids, %w = moe.route %logits k = 2 scaling = 0x7F800000
      : tensor<?x8xf32> -> tensor<?x2xi32>, tensor<?x2xf32>
  moe.yield %ids, %w : tensor<?x2xi32>, tensor<?x2xf32>
}

// -----

moe.router @route_softmax_weights_without_renormalize(%logits: tensor<?x8xf32>)
    -> (topk_ids: tensor<?x2xi32>, topk_weights: tensor<?x2xf32>)
    attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.route' op softmax_weights requires renormalize and no weights operand}}
  %ids, %w = moe.route %logits k = 2 softmax_weights
      : tensor<?x8xf32> -> tensor<?x2xi32>, tensor<?x2xf32>
  moe.yield %ids, %w : tensor<?x2xi32>, tensor<?x2xf32>
}

// -----

moe.router @route_softmax_weights_with_weights(%logits: tensor<?x8xf32>, %p: tensor<?x8xf32>)
    -> (topk_ids: tensor<?x2xi32>, topk_weights: tensor<?x2xf32>)
    attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.route' op softmax_weights requires renormalize and no weights operand}}
  %ids, %w = moe.route %logits weights(%p : tensor<?x8xf32>) k = 2 renormalize softmax_weights
      : tensor<?x8xf32> -> tensor<?x2xi32>, tensor<?x2xf32>
  moe.yield %ids, %w : tensor<?x2xi32>, tensor<?x2xf32>
}

// -----

moe.router @route_min_k_without_top_p(%logits: tensor<?x8xf32>, %p: tensor<?x8xf32>)
    -> (topk_ids: tensor<?x2xi32>, topk_weights: tensor<?x2xf32>)
    attributes {experts = 8, top_k = 2} {
  %m = arith.constant 1 : i64
  // expected-error @+1 {{'moe.route' op min_k(...) bounds top_p(...) truncation: give top_p too}}
  %ids, %w = moe.route %logits weights(%p : tensor<?x8xf32>) k = 2 min_k(%m : i64)
      : tensor<?x8xf32> -> tensor<?x2xi32>, tensor<?x2xf32>
  moe.yield %ids, %w : tensor<?x2xi32>, tensor<?x2xf32>
}

// -----

moe.router @route_top_p_softmax_weights(%logits: tensor<?x8xf32>)
    -> (topk_ids: tensor<?x2xi32>, topk_weights: tensor<?x2xf32>)
    attributes {experts = 8, top_k = 2} {
  %top = arith.constant 0.5 : f32
  // expected-error @+1 {{'moe.route' op top_p needs the selected experts' probabilities, which softmax_weights does not compute}}
  %ids, %w = moe.route %logits k = 2 renormalize softmax_weights top_p(%top : f32)
      : tensor<?x8xf32> -> tensor<?x2xi32>, tensor<?x2xf32>
  moe.yield %ids, %w : tensor<?x2xi32>, tensor<?x2xf32>
}

// -----

moe.router @route_top_p_above_one(%logits: tensor<?x8xf32>, %p: tensor<?x8xf32>)
    -> (topk_ids: tensor<?x2xi32>, topk_weights: tensor<?x2xf32>)
    attributes {experts = 8, top_k = 2} {
  %top = arith.constant 1.5 : f32
  // expected-error @+1 {{'moe.route' op top_p must be in (0, 1], got 1.5}}
  %ids, %w = moe.route %logits weights(%p : tensor<?x8xf32>) k = 2 top_p(%top : f32)
      : tensor<?x8xf32> -> tensor<?x2xi32>, tensor<?x2xf32>
  moe.yield %ids, %w : tensor<?x2xi32>, tensor<?x2xf32>
}

// -----

moe.router @route_min_k_above_k(%logits: tensor<?x8xf32>, %p: tensor<?x8xf32>)
    -> (topk_ids: tensor<?x2xi32>, topk_weights: tensor<?x2xf32>)
    attributes {experts = 8, top_k = 2} {
  %top = moe.knob "p" = 0.5 : f32
  %m = moe.knob "k_min" = 3 : i64
  // expected-error @+1 {{'moe.route' op min_k must be in [1, 2], got 3}}
  %ids, %w = moe.route %logits weights(%p : tensor<?x8xf32>) k = 2 top_p(%top : f32)
      min_k(%m : i64) : tensor<?x8xf32> -> tensor<?x2xi32>, tensor<?x2xf32>
  moe.yield %ids, %w : tensor<?x2xi32>, tensor<?x2xf32>
}

// -----

moe.router @route_max_rank_above_experts(%logits: tensor<?x8xf32>)
    -> (topk_ids: tensor<?x2xi32>, topk_weights: tensor<?x2xf32>)
    attributes {experts = 8, top_k = 2} {
  %r = moe.knob "max_rank" = 9 : i64
  // expected-error @+1 {{'moe.route' op max_rank must be in [0, 8], got 9}}
  %ids, %w = moe.route %logits k = 2 max_rank(%r : i64)
      : tensor<?x8xf32> -> tensor<?x2xi32>, tensor<?x2xf32>
  moe.yield %ids, %w : tensor<?x2xi32>, tensor<?x2xf32>
}

// -----

moe.router @admit_candidates_above_experts(%logits: tensor<?x8xf32>)
    -> (scores: tensor<?x8xf32>) attributes {experts = 8, top_k = 2} {
  %m = moe.knob "candidates" = 9 : i64
  %cf = moe.knob "capacity_factor" = 1.0 : f32
  // expected-error @+1 {{'moe.admit' op candidates must be in [0, 8], got 9}}
  %a = moe.admit %logits candidates(%m : i64) capacity_factor(%cf : f32) k = 2
      : tensor<?x8xf32>
  moe.yield %a : tensor<?x8xf32>
}

// -----

moe.router @admit_two_capacities(%logits: tensor<?x8xf32>)
    -> (scores: tensor<?x8xf32>) attributes {experts = 8, top_k = 2} {
  %c = moe.knob "capacity" = 3 : i64
  %cf = moe.knob "capacity_factor" = 1.0 : f32
  // expected-error @+1 {{'moe.admit' op takes capacity_factor(...) or capacity(...): exactly one}}
  %a = moe.admit %logits capacity_factor(%cf : f32) capacity(%c : i64) k = 2
      : tensor<?x8xf32>
  moe.yield %a : tensor<?x8xf32>
}

// -----

moe.router @admit_k_above_experts(%logits: tensor<?x8xf32>)
    -> (scores: tensor<?x8xf32>) attributes {experts = 8, top_k = 2} {
  %cf = moe.knob "capacity_factor" = 1.0 : f32
  // expected-error @+1 {{'moe.admit' op}}
  %a = moe.admit %logits capacity_factor(%cf : f32) k = 9 : tensor<?x8xf32>
  moe.yield %a : tensor<?x8xf32>
}

// -----

moe.router @route_rows_without_restriction(%logits: tensor<?x8xf32>, %mask: tensor<?xi32>)
    -> (topk_ids: tensor<?x2xi32>, topk_weights: tensor<?x2xf32>)
    attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.route' op rows(...) says which tokens within(...) and max_rank(...) restrict: give one of them}}
  %ids, %w = moe.route %logits k = 2 rows(%mask : tensor<?xi32>)
      : tensor<?x8xf32> -> tensor<?x2xi32>, tensor<?x2xf32>
  moe.yield %ids, %w : tensor<?x2xi32>, tensor<?x2xf32>
}

// -----

moe.router @route_rows_other_tokens(%logits: tensor<4x8xf32>, %mask: tensor<5xi32>)
    -> (topk_ids: tensor<4x2xi32>, topk_weights: tensor<4x2xf32>)
    attributes {experts = 8, top_k = 2} {
  %r = moe.knob "max_rank" = 4 : i64
  // expected-error @+1 {{'moe.route' op scores has 4 tokens but rows has 5}}
  %ids, %w = moe.route %logits k = 2 max_rank(%r : i64) rows(%mask : tensor<5xi32>)
      : tensor<4x8xf32> -> tensor<4x2xi32>, tensor<4x2xf32>
  moe.yield %ids, %w : tensor<4x2xi32>, tensor<4x2xf32>
}

// -----

moe.router @batch_reduce_rows_other_tokens(%p: tensor<4x8xf32>, %mask: tensor<3xi32>)
    -> (mass: tensor<8xf32>) attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.batch_reduce' op input has 4 tokens but rows has 3}}
  %m = moe.batch_reduce sum %p rows(%mask : tensor<3xi32>) : tensor<4x8xf32> -> tensor<8xf32>
  moe.yield %m : tensor<8xf32>
}

// -----

moe.router @metro_replicas_wrong_devices(%counts: tensor<8xi32>,
    %placement: !moe.placement<experts = 8, devices = 4, slots = 12>)
    -> (replicas: tensor<8xi32>, per_gpu: tensor<3xi32>) attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.metro_replicas' op device_experts must have 4 entries (the placement's devices), got 'tensor<3xi32>'}}
  %r, %g = moe.metro_replicas %counts on %placement
      : tensor<8xi32>, !moe.placement<experts = 8, devices = 4, slots = 12>
      -> tensor<8xi32>, tensor<3xi32>
  moe.yield %r, %g : tensor<8xi32>, tensor<3xi32>
}

// -----

moe.balance @least_loaded_indivisible(%loads: tensor<10xi32>)
    -> (plan: tensor<10x4xi32>, before: tensor<4xf32>, after: tensor<4xf32>,
        moved: tensor<1xi32>) attributes {experts = 10} {
  %a = moe.knob "capacity_factor" = 1.1 : f32
  %m = moe.knob "min_chunk" = 16 : i64
  %t = moe.knob "threshold" = 1.3 : f32
  // expected-error @+1 {{'moe.least_loaded' op the native placement needs experts (10) divisible by gpus (4)}}
  %plan, %b, %after, %moved = moe.least_loaded %loads capacity_factor(%a : f32)
      min_chunk(%m : i64) threshold(%t : f32) gpus = 4
      : tensor<10xi32> -> tensor<10x4xi32>, tensor<4xf32>, tensor<4xf32>, tensor<1xi32>
  moe.yield %plan, %b, %after, %moved : tensor<10x4xi32>, tensor<4xf32>, tensor<4xf32>, tensor<1xi32>
}

// -----

moe.balance @least_loaded_negative_chunk(%loads: tensor<8xi32>)
    -> (plan: tensor<8x4xi32>, before: tensor<4xf32>, after: tensor<4xf32>,
        moved: tensor<1xi32>) attributes {experts = 8} {
  %a = moe.knob "capacity_factor" = 1.1 : f32
  %m = moe.knob "min_chunk" = -1 : i64
  %t = moe.knob "threshold" = 1.3 : f32
  // expected-error @+1 {{'moe.least_loaded' op min_chunk must be in [0, inf], got -1}}
  %plan, %b, %after, %moved = moe.least_loaded %loads capacity_factor(%a : f32)
      min_chunk(%m : i64) threshold(%t : f32) gpus = 4
      : tensor<8xi32> -> tensor<8x4xi32>, tensor<4xf32>, tensor<4xf32>, tensor<1xi32>
  moe.yield %plan, %b, %after, %moved : tensor<8x4xi32>, tensor<4xf32>, tensor<4xf32>, tensor<1xi32>
}

// -----

moe.router @route_element_type(%logits: tensor<?x8xf32>)
    -> (topk_ids: tensor<?x2xi64>, topk_weights: tensor<?x2xf32>)
    attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.route' op result #0 must be 2D tensor of 32-bit signless integer values, but got 'tensor<?x2xi64>'}}
  %ids, %w = moe.route %logits k = 2 : tensor<?x8xf32> -> tensor<?x2xi64>, tensor<?x2xf32>
  moe.yield %ids, %w : tensor<?x2xi64>, tensor<?x2xf32>
}

// -----

func.func @remap_physical_dynamic_k(%ids: tensor<?x?xi32>,
    %placement: !moe.placement<experts = 8, devices = 2, slots = 10>) -> tensor<?x?xi32> {
  // expected-error @+1 {{'moe.remap_physical' op ids must have a static number of choices per token}}
  %phys = moe.remap_physical %ids, %placement
      : tensor<?x?xi32>, !moe.placement<experts = 8, devices = 2, slots = 10>
  return %phys : tensor<?x?xi32>
}

// -----

moe.router @remap_physical_expert_count(%ids: tensor<?x2xi32>,
    %placement: !moe.placement<experts = 4, devices = 2, slots = 10>)
    -> (out: tensor<?x2xi32>) attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.remap_physical' op placement has 4 experts but the enclosing router has 8}}
  %phys = moe.remap_physical %ids, %placement
      : tensor<?x2xi32>, !moe.placement<experts = 4, devices = 2, slots = 10>
  moe.yield %phys : tensor<?x2xi32>
}

// -----

func.func @expert_counts_dynamic_k(%ids: tensor<?x?xi32>) -> tensor<8xi32> {
  // expected-error @+1 {{'moe.expert_counts' op ids must have a static number of choices per token}}
  %counts = moe.expert_counts %ids : tensor<?x?xi32> -> tensor<8xi32>
  return %counts : tensor<8xi32>
}

// -----

moe.router @expert_counts_dynamic_experts(%ids: tensor<?x2xi32>)
    -> (expert_counts: tensor<?xi32>) attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.expert_counts' op counts must have a static number of experts}}
  %counts = moe.expert_counts %ids : tensor<?x2xi32> -> tensor<?xi32>
  moe.yield %counts : tensor<?xi32>
}

// -----

func.func @fill_empty_slots_k_mismatch(%ids: tensor<?x2xi32>, %w: tensor<?x3xf32>) {
  // expected-error @+1 {{'moe.fill_empty_slots' op weights must have k = 2 columns like ids, got 'tensor<?x3xf32>'}}
  %a, %b = moe.fill_empty_slots %ids, %w experts = 8 : tensor<?x2xi32>, tensor<?x3xf32>
  return
}

// -----

func.func @fill_empty_slots_no_experts(%ids: tensor<?x2xi32>, %w: tensor<?x2xf32>) {
  // expected-error @+1 {{'moe.fill_empty_slots' op experts must be >= 1, got 0}}
  %a, %b = moe.fill_empty_slots %ids, %w experts = 0 : tensor<?x2xi32>, tensor<?x2xf32>
  return
}

// -----

func.func @fill_empty_slots_counts(%ids: tensor<?x2xi32>, %w: tensor<?x2xf32>,
                                   %counts: tensor<4xi32>) {
  // expected-error @+1 {{'moe.fill_empty_slots' op counts must have one entry per expert (8), got 'tensor<4xi32>'}}
  %a, %b = moe.fill_empty_slots %ids, %w batch(%counts : tensor<4xi32>) experts = 8
      : tensor<?x2xi32>, tensor<?x2xf32>
  return
}

// -----

moe.router @fill_empty_slots_experts(%logits: tensor<?x8xf32>)
    -> (topk_ids: tensor<?x2xi32>, topk_weights: tensor<?x2xf32>)
    attributes {experts = 8, top_k = 2} {
  %ids, %w = moe.route %logits k = 2 : tensor<?x8xf32> -> tensor<?x2xi32>, tensor<?x2xf32>
  // expected-error @+1 {{'moe.fill_empty_slots' op experts has 16 experts but the enclosing router has 8}}
  %a, %b = moe.fill_empty_slots %ids, %w experts = 16 : tensor<?x2xi32>, tensor<?x2xf32>
  moe.yield %a, %b : tensor<?x2xi32>, tensor<?x2xf32>
}

// -----

moe.router @expert_counts_expert_count(%ids: tensor<?x2xi32>)
    -> (expert_counts: tensor<16xi32>) attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.expert_counts' op counts has 16 experts but the enclosing router has 8}}
  %counts = moe.expert_counts %ids : tensor<?x2xi32> -> tensor<16xi32>
  moe.yield %counts : tensor<16xi32>
}

// -----

// The phase gate counts tokens along dimension 0, so it needs one.
moe.router @when_rank0(%x: tensor<f32>, %l: tensor<?x8xf32>) -> (out: tensor<?x8xf32>)
    attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.when' op tokens must have a token dimension (rank >= 1), got 'tensor<f32>'}}
  %y = moe.when %x : tensor<f32> max_tokens = 4 -> (tensor<?x8xf32>) {
    moe.yield %l : tensor<?x8xf32>
  } else {
    moe.yield %l : tensor<?x8xf32>
  }
  moe.yield %y : tensor<?x8xf32>
}

// -----

// A score matrix over zero experts is rejected even outside a router.
func.func @zero_experts(%x: tensor<?x0xf32>) -> tensor<?x0xf32> {
  // expected-error @+1 {{'moe.softmax' op input must have at least one expert}}
  %p = moe.softmax %x : tensor<?x0xf32>
  return %p : tensor<?x0xf32>
}

// -----

// Inputs and outputs share one namespace (one C function, one JSON description).
// expected-error @+1 {{'moe.router' op result name 'logits' is also an argument name}}
moe.router @name_clash(%logits: tensor<?x8xf32>) -> (logits: tensor<?x8xf32>)
    attributes {experts = 8, top_k = 2} {
  moe.yield %logits : tensor<?x8xf32>
}

// -----

// Only the token dimension of an input may be dynamic.
// expected-error @+1 {{'moe.router' op argument 'logits' has a dynamic dimension 1; only dimension 0 (the tokens) may be dynamic}}
moe.router @dynamic_experts(%logits: tensor<?x?xf32>) -> (out: tensor<?x?xf32>)
    attributes {experts = 8, top_k = 2} {
  moe.yield %logits : tensor<?x?xf32>
}

// -----

moe.residency @ema_alpha(%s: tensor<8xf32>, %c: tensor<8xi32>) -> (out: tensor<8xf32>)
    attributes {experts = 8} {
  %a = moe.knob "alpha" = 1.0 : f32
  // expected-error @+1 {{'moe.ema' op alpha must be in [0, 1), got 1}}
  %r = moe.ema %s, %c alpha(%a : f32) : tensor<8xf32>, tensor<8xi32>
  moe.yield %r : tensor<8xf32>
}

// -----

moe.residency @ema_counts(%s: tensor<8xf32>, %c: tensor<4xi32>) -> (out: tensor<8xf32>)
    attributes {experts = 8} {
  %a = arith.constant 0.5 : f32
  // expected-error @+1 {{'moe.ema' op counts must have 8 entries, like hotness}}
  %r = moe.ema %s, %c alpha(%a : f32) : tensor<8xf32>, tensor<4xi32>
  moe.yield %r : tensor<8xf32>
}

// -----

// A budget that cannot hold one expert.
moe.residency @budget(%s: tensor<8xf32>, %cur: !moe.set<8>) -> (hi: !moe.set<8>)
    attributes {experts = 8} {
  %budget = moe.knob "budget" = 1000 : i64
  %fixed = arith.constant 900 : i64
  %hi_b = arith.constant 100 : i64
  %lo_b = arith.constant 10 : i64
  %layers = arith.constant 1 : i64
  // expected-error @+1 {{'moe.hi_capacity' op a budget of 1000 bytes cannot hold the fixed 900 bytes, the low-precision experts (1 layers x 8 x 10 bytes) and one high-precision expert per layer (1 x 100 bytes)}}
  %n = moe.hi_capacity budget(%budget : i64) fixed(%fixed : i64) hi_bytes(%hi_b : i64)
      lo_bytes(%lo_b : i64) layers(%layers : i64) experts = 8 -> i64
  %m = arith.constant 0.0 : f32
  %hi = moe.hot_set %s, %cur capacity(%n : i64) margin(%m : f32) : tensor<8xf32> -> !moe.set<8>
  moe.yield %hi : !moe.set<8>
}

// -----

moe.residency @hot_set_both(%s: tensor<8xf32>, %cur: !moe.set<8>) -> (hi: !moe.set<8>)
    attributes {experts = 8} {
  %n = arith.constant 2 : i64
  %m = arith.constant 0.5 : f32
  // expected-error @+1 {{'moe.hot_set' op takes exactly one of margin(...) and rank_slack(...)}}
  %hi = moe.hot_set %s, %cur capacity(%n : i64) margin(%m : f32) rank_slack(%n : i64)
      : tensor<8xf32> -> !moe.set<8>
  moe.yield %hi : !moe.set<8>
}

// -----

moe.residency @hot_set_margin(%s: tensor<8xf32>, %cur: !moe.set<8>) -> (hi: !moe.set<8>)
    attributes {experts = 8} {
  %n = arith.constant 2 : i64
  %m = arith.constant -0.5 : f32
  // expected-error @+1 {{'moe.hot_set' op margin must be >= 0, got -5.000000e-01}}
  %hi = moe.hot_set %s, %cur capacity(%n : i64) margin(%m : f32) : tensor<8xf32> -> !moe.set<8>
  moe.yield %hi : !moe.set<8>
}

// -----

moe.balance @eplb_groups(%loads: tensor<64xf32>)
    -> (p: tensor<72xi32>, l: tensor<64x9xi32>, c: tensor<64xi32>) attributes {experts = 64} {
  // expected-error @+1 {{'moe.eplb' op groups (5) must divide the 64 experts in hierarchical mode}}
  %p, %l, %c = moe.eplb %loads groups = 5 nodes = 1 gpus = 8
      : tensor<64xf32> -> tensor<72xi32>, tensor<64x9xi32>, tensor<64xi32>
  moe.yield %p, %l, %c : tensor<72xi32>, tensor<64x9xi32>, tensor<64xi32>
}

// -----

// More replicas than slots can hold: fewer physical slots than logical experts.
moe.balance @eplb_slots(%loads: tensor<64xf32>)
    -> (p: tensor<32xi32>, l: tensor<64x1xi32>, c: tensor<64xi32>) attributes {experts = 64} {
  // expected-error @+1 {{'moe.eplb' op phy2log must have a static number of slots >= experts (64)}}
  %p, %l, %c = moe.eplb %loads groups = 8 nodes = 1 gpus = 8
      : tensor<64xf32> -> tensor<32xi32>, tensor<64x1xi32>, tensor<64xi32>
  moe.yield %p, %l, %c : tensor<32xi32>, tensor<64x1xi32>, tensor<64xi32>
}

// -----

moe.balance @eplb_gpus(%loads: tensor<64xf32>)
    -> (p: tensor<72xi32>, l: tensor<64x9xi32>, c: tensor<64xi32>) attributes {experts = 64} {
  // expected-error @+1 {{'moe.eplb' op gpus (6) must be a multiple of nodes (4)}}
  %p, %l, %c = moe.eplb %loads groups = 8 nodes = 4 gpus = 6
      : tensor<64xf32> -> tensor<72xi32>, tensor<64x9xi32>, tensor<64xi32>
  moe.yield %p, %l, %c : tensor<72xi32>, tensor<64x9xi32>, tensor<64xi32>
}

// -----

moe.balance @eplb_log2phy(%loads: tensor<64xf32>)
    -> (p: tensor<72xi32>, l: tensor<64x8xi32>, c: tensor<64xi32>) attributes {experts = 64} {
  // expected-error @+1 {{'moe.eplb' op log2phy must be 64x9 (experts x (slots - experts + 1))}}
  %p, %l, %c = moe.eplb %loads groups = 8 nodes = 1 gpus = 8
      : tensor<64xf32> -> tensor<72xi32>, tensor<64x8xi32>, tensor<64xi32>
  moe.yield %p, %l, %c : tensor<72xi32>, tensor<64x8xi32>, tensor<64xi32>
}

// -----

moe.balance @default_placement(%loads: tensor<60xf32>) -> (d: tensor<8xf32>)
    attributes {experts = 60} {
  // expected-error @+1 {{'moe.device_loads' op the default placement needs experts (60) divisible by gpus (8)}}
  %d = moe.device_loads %loads gpus = 8 : tensor<60xf32> -> tensor<8xf32>
  moe.yield %d : tensor<8xf32>
}

// -----

// Rule bodies are over the rule's experts too.
moe.residency @rule_experts(%s: tensor<8xf32>, %cur: !moe.set<16>) -> (hi: !moe.set<16>)
    attributes {experts = 8} {
  // expected-error @-2 {{'!moe.set<16>' is over 16 experts but the enclosing residency rule has 8}}
  moe.yield %cur : !moe.set<16>
}

// -----

moe.balance @libra_split(%req: tensor<8x60xi32>) -> (m: tensor<60x8xi32>) attributes {experts = 60} {
  %n = arith.constant 2 : i64
  %a = arith.constant 0.5 : f32
  // expected-error @+1 {{'moe.libra_replicate' op the 60 experts must split evenly over the 8 GPUs (home GPU of e: e / (E/G))}}
  %m = moe.libra_replicate %req extra(%n : i64) alpha(%a : f32) : tensor<8x60xi32> -> tensor<60x8xi32>
  moe.yield %m : tensor<60x8xi32>
}

// -----

moe.balance @libra_alpha(%req: tensor<4x16xi32>) -> (m: tensor<16x4xi32>) attributes {experts = 16} {
  %n = arith.constant 2 : i64
  %a = moe.knob "alpha" = 1.5 : f32
  // expected-error @+1 {{'moe.libra_replicate' op alpha must be in [0, 1], got 1.5}}
  %m = moe.libra_replicate %req extra(%n : i64) alpha(%a : f32) : tensor<4x16xi32> -> tensor<16x4xi32>
  moe.yield %m : tensor<16x4xi32>
}

// -----

moe.balance @libra_placement(%req: tensor<4x16xi32>, %m: tensor<4x16xi32>)
    -> (plan: tensor<4x16xi32>, l: tensor<4xf32>) attributes {experts = 16} {
  %eps = arith.constant 0.1 : f32
  // expected-error @+1 {{'moe.libra_shard' op placement must be 16x4 (experts x GPUs)}}
  %plan, %l = moe.libra_shard %req, %m epsilon(%eps : f32)
      : tensor<4x16xi32>, tensor<4x16xi32> -> tensor<4x16xi32>, tensor<4xf32>
  moe.yield %plan, %l : tensor<4x16xi32>, tensor<4xf32>
}

// -----

moe.router @gate_shape(%h: tensor<?x32xf32>, %w: tensor<16x8xf32>) -> (l: tensor<?x8xf32>)
    attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.gate' op weight has 16 rows but hidden states have 32 features}}
  %l = moe.gate %h, %w : tensor<?x32xf32>, tensor<16x8xf32> -> tensor<?x8xf32>
  moe.yield %l : tensor<?x8xf32>
}

// -----

moe.prefetch @lru_capacity(%r: !moe.set<8>, %lu: tensor<8xi32>, %now: tensor<1xi32>)
    -> (res: !moe.set<8>) attributes {experts = 8} {
  %c = moe.knob "capacity" = 0 : i64
  // expected-error @+1 {{'moe.two_level_lru' op capacity must be in [1, 8], got 0}}
  %a, %b, %x, %y, %z = moe.two_level_lru %r, %lu, %r, %r, %now, %now capacity(%c : i64)
      : !moe.set<8>, tensor<8xi32>, tensor<1xi32>, tensor<1xi32>
  moe.yield %a : !moe.set<8>
}

// -----

moe.prefetch @step_bandwidth(%ne: tensor<1xi32>) -> (s: tensor<1xi32>) attributes {experts = 8} {
  %es = arith.constant 100 : i64
  %cs = moe.knob "bandwidth" = 0.0 : f32
  %tl = arith.constant 1.0 : f32
  %l = arith.constant 4 : i64
  // expected-error @+1 {{'moe.step_size' op bandwidth must be > 0, got 0.000000e+00}}
  %s = moe.step_size %ne expert_bytes(%es : i64) bandwidth(%cs : f32) layer_time(%tl : f32)
      layers(%l : i64) : tensor<1xi32> -> tensor<1xi32>
  moe.yield %s : tensor<1xi32>
}

// -----

moe.prefetch @feedback_threshold(%s: tensor<1xi32>, %ev: tensor<?xi32>)
    -> (o: tensor<1xi32>) attributes {experts = 8} {
  %a = arith.constant 2 : i64
  %b = arith.constant 0 : i64
  %l = arith.constant 4 : i64
  // expected-error @+1 {{'moe.step_feedback' op overfetch_threshold must be in [1, 2147483647], got 0}}
  %x, %y, %z, %t = moe.step_feedback %s, %s, %s, %s, %ev stall_threshold(%a : i64)
      overfetch_threshold(%b : i64) layers(%l : i64)
      : tensor<1xi32>, tensor<1xi32>, tensor<1xi32>, tensor<1xi32>, tensor<?xi32>
      -> tensor<1xi32>, tensor<1xi32>, tensor<1xi32>, tensor<?xi32>
  moe.yield %x : tensor<1xi32>
}

// -----

moe.residency @ema_experts(%s: tensor<4xf32>, %c: tensor<4xi32>) -> (out: tensor<4xf32>)
    attributes {experts = 8} {
  %a = arith.constant 0.5 : f32
  // expected-error @+1 {{'moe.ema' op hotness has 4 experts but the enclosing residency rule has 8}}
  %r = moe.ema %s, %c alpha(%a : f32) : tensor<4xf32>, tensor<4xi32>
  moe.yield %r : tensor<4xf32>
}

//===----------------------------------------------------------------------===//
// Hardening (issue 11): unknown attributes, ops that cannot be compiled in a policy,
// types compiled code cannot pass, and sizes / knob values beyond what compiled code
// computes in its integer types.
//===----------------------------------------------------------------------===//

// -----

moe.router @unknown_attr(%x: tensor<?x8xf32>) -> (ids: tensor<?x2xi32>, w: tensor<?x2xf32>)
    attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.route' op has no attribute 'capacity' (its attributes: k, renormalize, scaling, softmax_weights, operandSegmentSizes)}}
  %ids, %w = moe.route %x k = 2 {capacity = 5} : tensor<?x8xf32> -> tensor<?x2xi32>, tensor<?x2xf32>
  moe.yield %ids, %w : tensor<?x2xi32>, tensor<?x2xf32>
}

// -----

// expected-error @+1 {{'moe.router' op has no attribute 'capacity'}}
moe.router @unknown_router_attr(%x: tensor<?x2xi32>) -> (topk_ids: tensor<?x2xi32>)
    attributes {experts = 8, top_k = 2, capacity = 5} {
  moe.yield %x : tensor<?x2xi32>
}

// -----

moe.balance @unknown_moe_attr(%l: tensor<8xf32>) -> (out: tensor<1xf32>) attributes {experts = 8} {
  // expected-error @+1 {{unknown attribute 'moe.extra' in the moe namespace}}
  %i = moe.imbalance %l {moe.extra = 1} : tensor<8xf32> -> tensor<1xf32>
  moe.yield %i : tensor<1xf32>
}

// -----

// A moe.* attribute on another op must have the shape the passes read.
// expected-error @+1 {{attribute 'moe.abi' must be a #moe.abi<[...]> (the router's C ABI)}}
func.func private @bad_abi() attributes {moe.abi = 1}

// -----

// expected-error @+1 {{a router's ABI starts with its token count (kind tokens)}}
func.func private @abi_without_tokens() attributes {moe.abi = #moe.abi<[#moe.param<name = "logits", role = in, kind = tensor, type = memref<4x8xf32>>]>}

// -----

// expected-error @+2 {{failed to parse Moe_AbiAttr parameter 'params'}}
// expected-error @+1 {{ABI parameter 'logits' has a dynamic shape and needs a size rule array<i64: a, b, d>}}
func.func private @abi_dynamic_without_size() attributes {moe.abi = #moe.abi<[#moe.param<name = "num_tokens", role = in, kind = tokens, type = index>, #moe.param<name = "logits", role = in, kind = tensor, type = memref<?x8xf32>>]>}

// -----

// expected-error @+2 {{failed to parse Moe_AbiAttr parameter 'params'}}
// expected-error @+1 {{ABI parameter 'logits' has a size rule that is not array<i64: a, b, d> with a, b >= 0 and d >= 1}}
func.func private @abi_bad_size() attributes {moe.abi = #moe.abi<[#moe.param<name = "num_tokens", role = in, kind = tokens, type = index>, #moe.param<name = "logits", role = in, kind = tensor, type = memref<?x8xf32>, size = [1, 0, 0]>]>}

// -----

// expected-error @+1 {{ABI parameter 'x' appears twice}}
func.func private @abi_twice() attributes {moe.abi = #moe.abi<[#moe.param<name = "num_tokens", role = in, kind = tokens, type = index>, #moe.param<name = "x", role = in, kind = scalar, type = i32>, #moe.param<name = "x", role = out, kind = tensor, type = memref<4xi32>>]>}

// -----

// expected-error @+1 {{ABI parameter 'x' is out of order (inputs, then outputs, then knobs)}}
func.func private @abi_order() attributes {moe.abi = #moe.abi<[#moe.param<name = "num_tokens", role = in, kind = tokens, type = index>, #moe.param<name = "y", role = out, kind = tensor, type = memref<4xi32>>, #moe.param<name = "x", role = in, kind = scalar, type = i32>]>}

// -----

// expected-error @+2 {{failed to parse Moe_AbiAttr parameter 'params'}}
// expected-error @+1 {{ABI parameter 'budget' is a knob and needs a default_value and rules}}
func.func private @abi_knob_without_default() attributes {moe.abi = #moe.abi<[#moe.param<name = "num_tokens", role = in, kind = tokens, type = index>, #moe.param<name = "budget", role = knob, kind = scalar, type = i64>]>}

// -----

// expected-error @+2 {{failed to parse Moe_AbiAttr parameter 'params'}}
// expected-error @+1 {{ABI parameter 'budget' has a default of another type than 'i64'}}
func.func private @abi_knob_default_type() attributes {moe.abi = #moe.abi<[#moe.param<name = "num_tokens", role = in, kind = tokens, type = index>, #moe.param<name = "budget", role = knob, kind = scalar, type = i64, default_value = 1.0 : f32, rules = []>]>}

// -----

// expected-error @+2 {{failed to parse Moe_AbiAttr parameter 'params'}}
// expected-error @+1 {{ABI parameter 'ids' has values "tokens" (expected "phase" or "expert_ids")}}
func.func private @abi_values() attributes {moe.abi = #moe.abi<[#moe.param<name = "num_tokens", role = in, kind = tokens, type = index>, #moe.param<name = "ids", role = in, kind = tensor, type = memref<4xi32>, values = "tokens">]>}

// -----

// expected-error @+1 {{unknown attribute 'moe.frobnicate' in the moe namespace}}
func.func private @unknown_moe_namespace() attributes {moe.frobnicate = 1}

// -----

// An inherent attribute of the wrong kind in a router's attribute dictionary is an
// error at parse time (it used to be dropped; shared_experts then read as null and the
// verifier crashed).
moe.router @float_shared(%x: tensor<?x2xi32>) -> (topk_ids: tensor<?x2xi32>)
    // expected-error @+1 {{'moe.router' op attribute 'shared_experts' failed to satisfy constraint: 64-bit signless integer attribute}}
    attributes {experts = 8, top_k = 2, shared_experts = 0.0} {
  moe.yield %x : tensor<?x2xi32>
}

// -----

moe.residency @float_experts(%h: tensor<8xf32>) -> (out: tensor<8xf32>)
    // expected-error @+1 {{'moe.residency' op attribute 'experts' failed to satisfy constraint: 64-bit signless integer attribute}}
    attributes {experts = 1.5} {
  moe.yield %h : tensor<8xf32>
}

// -----

moe.router @tensor_dim(%x: tensor<?x8xf32>) -> (topk_ids: tensor<?x2xi32>, w: tensor<?x2xf32>)
    attributes {experts = 8, top_k = 2} {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{'tensor.dim' op cannot be compiled in a router: a policy body holds moe ops, moe.knob, scalar arith.constant ops and (in a router) scalar arith ops only}}
  %d = tensor.dim %x, %c0 : tensor<?x8xf32>
  %ids, %w = moe.route %x k = 2 : tensor<?x8xf32> -> tensor<?x2xi32>, tensor<?x2xf32>
  moe.yield %ids, %w : tensor<?x2xi32>, tensor<?x2xf32>
}

// -----

moe.residency @arith_in_rule(%h: tensor<8xf32>) -> (out: tensor<8xf32>) attributes {experts = 8} {
  %a = moe.knob "a" = 1 : i64
  // expected-error @+1 {{'arith.addi' op cannot be compiled in a residency rule}}
  %b = arith.addi %a, %a : i64
  moe.yield %h : tensor<8xf32>
}

// -----

moe.router @tensor_constant(%x: tensor<?x2xi32>) -> (topk_ids: tensor<?x2xi32>)
    attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'arith.constant' op of type 'tensor<8xf32>' cannot be compiled in a router: only scalar constants (integers and floats) can}}
  %c = arith.constant dense<1.0> : tensor<8xf32>
  moe.yield %x : tensor<?x2xi32>
}

// -----

// expected-error @+1 {{'moe.router' op argument 'x' has type 'f64', which compiled code cannot take}}
moe.router @f64_scalar(%ids: tensor<?x2xi32>, %x: f64) -> (topk_ids: tensor<?x2xi32>)
    attributes {experts = 8, top_k = 2} {
  moe.yield %ids : tensor<?x2xi32>
}

// -----

// expected-error @+1 {{'moe.router' op result 'q' has type '!moe.placement<experts = 8, devices = 1, slots = 8>', which compiled code cannot return}}
moe.router @placement_result(%p: !moe.placement<experts = 8, devices = 1, slots = 8>) -> (q: !moe.placement<experts = 8, devices = 1, slots = 8>)
    attributes {experts = 8, top_k = 2} {
  moe.yield %p : !moe.placement<experts = 8, devices = 1, slots = 8>
}

// -----

moe.router @when_scalar(%x: tensor<?x8xf32>) -> (topk_ids: tensor<?x2xi32>, w: tensor<?x2xf32>)
    attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.when' op results must be tensors or expert sets (what a phase gate can hold in a buffer), got 'i64'}}
  %n = moe.when %x : tensor<?x8xf32> max_tokens = 4 -> (i64) {
    %a = arith.constant 1 : i64
    moe.yield %a : i64
  } else {
    %b = arith.constant 2 : i64
    moe.yield %b : i64
  }
  %ids, %w = moe.route %x k = 2 : tensor<?x8xf32> -> tensor<?x2xi32>, tensor<?x2xf32>
  moe.yield %ids, %w : tensor<?x2xi32>, tensor<?x2xf32>
}

// -----

// expected-error @+1 {{'moe.router' op experts must be <= 1048576, got 1099511627776}}
moe.router @huge_experts(%x: tensor<?x2xi32>) -> (topk_ids: tensor<?x2xi32>)
    attributes {experts = 1099511627776, top_k = 2} {
  moe.yield %x : tensor<?x2xi32>
}

// -----

// expected-error @+1 {{an expert set holds at most 1048576 experts, got 2147483648}}
func.func private @huge_set(!moe.set<2147483648>)

// -----

// expected-error @+1 {{a placement of 8 experts over 9223372036854775800 slots is too large}}
func.func private @huge_placement(!moe.placement<experts = 8, devices = 8, slots = 9223372036854775800>)

// -----

// expected-error @+1 {{'tensor<4611686018427387904xi32>' is too large: its static dimensions hold more than 268435456 elements}}
moe.balance @huge_arg(%x: tensor<4611686018427387904xi32>, %l: tensor<8xf32>) -> (i: tensor<1xf32>) attributes {experts = 8} {
  %i = moe.imbalance %l : tensor<8xf32> -> tensor<1xf32>
  moe.yield %i : tensor<1xf32>
}

// -----

moe.router @huge_block(%ids: tensor<?x2xi32>, %c: tensor<8xi32>) -> (s: tensor<?xi32>)
    attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.align_blocks' op block_size must be in [1, 65536], got 4611686018427387904}}
  %s, %b, %p = moe.align_blocks %ids, %c block_size = 4611686018427387904
      : tensor<?x2xi32>, tensor<8xi32> -> tensor<?xi32>, tensor<?xi32>, tensor<1xi32>
  moe.yield %s : tensor<?xi32>
}

// -----

moe.prefetch @step_layers(%ne: tensor<1xi32>) -> (s: tensor<1xi32>) attributes {experts = 8} {
  %es = arith.constant 100 : i64
  %cs = arith.constant 1.0 : f32
  %tl = arith.constant 1.0 : f32
  %l = moe.knob "layers" = 1152921504606846976 : i64
  // expected-error @+1 {{'moe.step_size' op layers must be in [1, 16777216], got 1152921504606846976}}
  %s = moe.step_size %ne expert_bytes(%es : i64) bandwidth(%cs : f32) layer_time(%tl : f32)
      layers(%l : i64) : tensor<1xi32> -> tensor<1xi32>
  moe.yield %s : tensor<1xi32>
}

// -----

moe.prefetch @feedback_stall_threshold(%s: tensor<1xi32>, %ev: tensor<?xi32>)
    -> (o: tensor<1xi32>) attributes {experts = 8} {
  %a = moe.knob "stall_threshold" = 4294967296 : i64
  %b = arith.constant 1 : i64
  %l = arith.constant 4 : i64
  // expected-error @+1 {{'moe.step_feedback' op stall_threshold must be in [0, 2147483646], got 4294967296}}
  %x, %y, %z, %t = moe.step_feedback %s, %s, %s, %s, %ev stall_threshold(%a : i64)
      overfetch_threshold(%b : i64) layers(%l : i64)
      : tensor<1xi32>, tensor<1xi32>, tensor<1xi32>, tensor<1xi32>, tensor<?xi32>
      -> tensor<1xi32>, tensor<1xi32>, tensor<1xi32>, tensor<?xi32>
  moe.yield %x : tensor<1xi32>
}

// -----

// A generic router writes every expert count as `?`.
moe.router @mixed(%logits: tensor<?x?xf32>) -> (counts: tensor<?xi32>) {
  %ids, %w = moe.route %logits k = ? : tensor<?x?xf32> -> tensor<?x?xi32>, tensor<?x?xf32>
  // expected-error @+1 {{'moe.expert_counts' op counts has 8 experts but the enclosing generic router leaves the expert count to its binding: write ?}}
  %c = moe.expert_counts %ids : tensor<?x?xi32> -> tensor<8xi32>
  moe.yield %c : tensor<8xi32>
}

// -----

moe.router @k_param(%logits: tensor<?x8xf32>) -> (topk_ids: tensor<?x2xi32>)
    attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.topk' op k = ? is only allowed in a generic policy}}
  %v, %i = moe.topk %logits k = ? : tensor<?x8xf32> -> tensor<?x?xf32>, tensor<?x?xi32>
  %ids, %w = moe.route %logits k = 2 : tensor<?x8xf32> -> tensor<?x2xi32>, tensor<?x2xf32>
  moe.yield %ids : tensor<?x2xi32>
}

// -----

moe.router @bad_param(%logits: tensor<?x8xf32>) -> (topk_ids: tensor<?x2xi32>)
    attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.param' op unknown shape parameter 'groups' (expected experts, top_k)}}
  %g = moe.param "groups" : i64
  %ids, %w = moe.route %logits k = 2 : tensor<?x8xf32> -> tensor<?x2xi32>, tensor<?x2xf32>
  moe.yield %ids : tensor<?x2xi32>
}

// -----

// expected-error @+1 {{'moe.router' op has experts = 8 but no top_k: a router binds both or neither}}
moe.router @half_bound(%logits: tensor<?x8xf32>) -> (topk_ids: tensor<?x2xi32>)
    attributes {experts = 8} {
  %ids, %w = moe.route %logits k = 2 : tensor<?x8xf32> -> tensor<?x2xi32>, tensor<?x2xf32>
  moe.yield %ids : tensor<?x2xi32>
}

// -----

// Capacity-limited and expert-choice routing.
moe.router @capacity_both(%ids: tensor<?x2xi32>, %w: tensor<?x2xf32>) -> (c: tensor<8xi32>)
    attributes {experts = 8, top_k = 2} {
  %cf = moe.knob "capacity_factor" = 1.25 : f32
  %c = moe.knob "capacity" = 4 : i64
  // expected-error @+1 {{'moe.capacity' op takes capacity_factor(...) or capacity(...): exactly one}}
  %k, %kw, %counts, %d = moe.capacity %ids, %w capacity_factor(%cf : f32) capacity(%c : i64)
      : tensor<?x2xi32>, tensor<?x2xf32> -> tensor<?x2xi32>, tensor<?x2xf32>, tensor<8xi32>, tensor<1xi32>
  moe.yield %counts : tensor<8xi32>
}

// -----

moe.router @capacity_neither(%ids: tensor<?x2xi32>, %w: tensor<?x2xf32>) -> (c: tensor<8xi32>)
    attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'moe.capacity' op takes capacity_factor(...) or capacity(...): exactly one}}
  %k, %kw, %counts, %d = moe.capacity %ids, %w
      : tensor<?x2xi32>, tensor<?x2xf32> -> tensor<?x2xi32>, tensor<?x2xf32>, tensor<8xi32>, tensor<1xi32>
  moe.yield %counts : tensor<8xi32>
}

// -----

moe.router @capacity_factor_zero(%ids: tensor<?x2xi32>, %w: tensor<?x2xf32>) -> (c: tensor<8xi32>)
    attributes {experts = 8, top_k = 2} {
  %cf = moe.knob "capacity_factor" = 0.0 : f32
  // expected-error @+1 {{capacity_factor}}
  %k, %kw, %counts, %d = moe.capacity %ids, %w capacity_factor(%cf : f32)
      : tensor<?x2xi32>, tensor<?x2xf32> -> tensor<?x2xi32>, tensor<?x2xf32>, tensor<8xi32>, tensor<1xi32>
  moe.yield %counts : tensor<8xi32>
}

// -----

moe.router @capacity_negative(%ids: tensor<?x2xi32>, %w: tensor<?x2xf32>) -> (c: tensor<8xi32>)
    attributes {experts = 8, top_k = 2} {
  %c = moe.knob "capacity" = -1 : i64
  // expected-error @+1 {{capacity}}
  %k, %kw, %counts, %d = moe.capacity %ids, %w capacity(%c : i64)
      : tensor<?x2xi32>, tensor<?x2xf32> -> tensor<?x2xi32>, tensor<?x2xf32>, tensor<8xi32>, tensor<1xi32>
  moe.yield %counts : tensor<8xi32>
}

// -----

moe.router @capacity_shapes(%ids: tensor<?x2xi32>, %w: tensor<?x3xf32>) -> (c: tensor<8xi32>)
    attributes {experts = 8, top_k = 2} {
  %c = moe.knob "capacity" = 4 : i64
  // expected-error @+1 {{'moe.capacity' op weights must have the shape of the ids}}
  %k, %kw, %counts, %d = moe.capacity %ids, %w capacity(%c : i64)
      : tensor<?x2xi32>, tensor<?x3xf32> -> tensor<?x2xi32>, tensor<?x3xf32>, tensor<8xi32>, tensor<1xi32>
  moe.yield %counts : tensor<8xi32>
}

// -----

moe.router @capacity_experts(%ids: tensor<?x2xi32>, %w: tensor<?x2xf32>) -> (c: tensor<4xi32>)
    attributes {experts = 8, top_k = 2} {
  %c = moe.knob "capacity" = 4 : i64
  // expected-error @+1 {{'moe.capacity' op counts}}
  %k, %kw, %counts, %d = moe.capacity %ids, %w capacity(%c : i64)
      : tensor<?x2xi32>, tensor<?x2xf32> -> tensor<?x2xi32>, tensor<?x2xf32>, tensor<4xi32>, tensor<1xi32>
  moe.yield %counts : tensor<4xi32>
}

// -----

moe.router @expert_choice_max(%p: tensor<?x8xf32>) -> (ids: tensor<?x9xi32>)
    attributes {experts = 8, top_k = 2} {
  %cf = moe.knob "capacity_factor" = 1.0 : f32
  // expected-error @+1 {{'moe.expert_choice' op max_experts must be in [1, 8], got 9}}
  %a, %b, %c, %d, %e, %f, %g = moe.expert_choice %p capacity_factor(%cf : f32) k = 2
      max_experts = 9 block_size = 16
      : tensor<?x8xf32> -> tensor<?x9xi32>, tensor<?x9xf32>, tensor<?xi32>, tensor<?xf32>,
        tensor<?xi32>, tensor<1xi32>, tensor<1xi32>
  moe.yield %a : tensor<?x9xi32>
}

// -----

moe.router @expert_choice_columns(%p: tensor<?x8xf32>) -> (ids: tensor<?x2xi32>)
    attributes {experts = 8, top_k = 2} {
  %cf = moe.knob "capacity_factor" = 1.0 : f32
  // expected-error @+1 {{'moe.expert_choice' op topk_ids must have max_experts = 3 columns, got 'tensor<?x2xi32>'}}
  %a, %b, %c, %d, %e, %f, %g = moe.expert_choice %p capacity_factor(%cf : f32) k = 2
      max_experts = 3 block_size = 16
      : tensor<?x8xf32> -> tensor<?x2xi32>, tensor<?x3xf32>, tensor<?xi32>, tensor<?xf32>,
        tensor<?xi32>, tensor<1xi32>, tensor<1xi32>
  moe.yield %a : tensor<?x2xi32>
}

// -----

moe.router @expert_choice_static_layout(%p: tensor<?x8xf32>) -> (ids: tensor<?x3xi32>)
    attributes {experts = 8, top_k = 2} {
  %cf = moe.knob "capacity_factor" = 1.0 : f32
  // expected-error @+1 {{'moe.expert_choice' op sorted_weights depends on the token count: its size must be dynamic}}
  %a, %b, %c, %d, %e, %f, %g = moe.expert_choice %p capacity_factor(%cf : f32) k = 2
      max_experts = 3 block_size = 16
      : tensor<?x8xf32> -> tensor<?x3xi32>, tensor<?x3xf32>, tensor<?xi32>, tensor<64xf32>,
        tensor<?xi32>, tensor<1xi32>, tensor<1xi32>
  moe.yield %a : tensor<?x3xi32>
}

// -----

moe.router @expert_choice_block(%p: tensor<?x8xf32>) -> (ids: tensor<?x3xi32>)
    attributes {experts = 8, top_k = 2} {
  %c = moe.knob "capacity" = 4 : i64
  // expected-error @+1 {{'moe.expert_choice' op block_size must be in [1, 65536], got 0}}
  %a, %b, %cc, %d, %e, %f, %g = moe.expert_choice %p capacity(%c : i64) k = 2
      max_experts = 3 block_size = 0
      : tensor<?x8xf32> -> tensor<?x3xi32>, tensor<?x3xf32>, tensor<?xi32>, tensor<?xf32>,
        tensor<?xi32>, tensor<1xi32>, tensor<1xi32>
  moe.yield %a : tensor<?x3xi32>
}

// -----

moe.router @arith_on_tensor(%x: tensor<?x8xf32>) -> (topk_ids: tensor<?x2xi32>, w: tensor<?x2xf32>)
    attributes {experts = 8, top_k = 2} {
  // expected-error @+1 {{'arith.addf' op cannot be compiled in a router: arith ops in a router compute on scalars only}}
  %y = arith.addf %x, %x : tensor<?x8xf32>
  %ids, %w = moe.route %y k = 2 : tensor<?x8xf32> -> tensor<?x2xi32>, tensor<?x2xf32>
  moe.yield %ids, %w : tensor<?x2xi32>, tensor<?x2xf32>
}

// -----

// A GPU kernel's launch contract (#moe.launch, set by moe-map-to-gpu).
// expected-error @+1 {{attribute 'moe.launch' must be a #moe.launch<...> (a kernel's launch)}}
func.func private @launch_not_typed() attributes {moe.launch = "large"}

// -----

// expected-error @+1 {{tokens_per_cta must be positive for a large-batch kernel (large, cooperative) and 0 otherwise, got 0 for size class large}}
func.func private @launch_large_without_ctas() attributes {moe.launch = #moe.launch<size_class = large, min_tokens = 9, max_tokens = 0, tokens_per_cta = 0, workspace_per_token = 0, workspace_fixed = 0>}

// -----

// expected-error @+1 {{a kernel serves T in [min_tokens >= 1, max_tokens] (max_tokens 0: unbounded), got [9, 8]}}
func.func private @launch_empty_range() attributes {moe.launch = #moe.launch<size_class = decode, min_tokens = 9, max_tokens = 8, tokens_per_cta = 0, workspace_per_token = 0, workspace_fixed = 0>}

// -----

// expected-error @+1 {{only a decode kernel has a max_tokens bound}}
func.func private @launch_grid_bounded() attributes {moe.launch = #moe.launch<size_class = grid, min_tokens = 1, max_tokens = 8, tokens_per_cta = 0, workspace_per_token = 0, workspace_fixed = 0>}

// -----

// expected-error @+2 {{failed to parse Moe_KernelLaunchAttr parameter 'size_class'}}
// expected-error @+1 {{expected one of [decode, grid, large, cooperative] for which batches a GPU kernel serves, got: huge}}
func.func private @launch_unknown_class() attributes {moe.launch = #moe.launch<size_class = huge, min_tokens = 1, max_tokens = 0, tokens_per_cta = 0, workspace_per_token = 0, workspace_fixed = 0>}

// -----

// expected-error @+1 {{attribute 'moe.token_tiles' must be a positive i64 integer on an scf.parallel (tokens per tile)}}
func.func private @tiles_not_on_a_loop() attributes {moe.token_tiles = 8 : i64}

// -----

func.func @temporary_not_on_a_view(%m: memref<4xi8>) {
  // expected-error @+1 {{attribute 'moe.workspace_temporary' must be a unit attribute on a memref.view}}
  %c = memref.cast %m {moe.workspace_temporary} : memref<4xi8> to memref<?xi8>
  return
}

// -----

// A grid barrier outside a GPU kernel (moe-map-to-gpu puts one in the cooperative
// kernel only).
func.func @grid_barrier_outside_a_kernel() {
  // expected-error @+1 {{'moe.grid_barrier' op must be inside a GPU kernel (gpu.func)}}
  moe.grid_barrier
  return
}
