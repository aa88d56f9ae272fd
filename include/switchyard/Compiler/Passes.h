//===- Passes.h - the host target's loop passes -----------------*- C++ -*-===//
//
// moe-host-threads and moe-inline-alloca-scopes (declared in Passes.td, implemented in
// lib/Compiler/HostThreads.cpp): which of a router's host loops run on OpenMP threads.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_COMPILER_PASSES_H
#define SWITCHYARD_COMPILER_PASSES_H

#include "mlir/Pass/Pass.h"

namespace switchyard::moe {

/// Batches of at least this many token x expert scores (T * E) run a router's host
/// loops on OpenMP threads: at E = 128 from 128 tokens, at E = 8 from 2048
/// (moe-host-threads' default min-work, --host-threads-min-work's default).
constexpr int64_t kDefaultThreadMinWork = 16384;

#define GEN_PASS_DECL
#include "switchyard/Compiler/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "switchyard/Compiler/Passes.h.inc"

} // namespace switchyard::moe

#endif
