//===- DeviceBackend.h - what device expert memory asks of a GPU -*- C++ -*-===//
//
// The few device operations the device path of expert memory (DeviceExperts.h) is
// built on, behind an interface so that its bookkeeping - pools, slots, the order of
// copies, events and waits - runs and is tested on the host with a fake backend that
// records the operations, and on a GPU with the CUDA backend of the CUDA layer
// (runtime/lib/Executor/Cuda/CudaBackend.cpp: cudaMalloc, cudaHostAlloc,
// cudaMemcpyAsync, cudaEventRecord, cudaStreamWaitEvent). Streams and events are opaque
// handles of the backend. Every call that can fail returns false (nullptr) and says why
// in `error`; nothing here blocks the host except synchronize().
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_MEMORY_DEVICEBACKEND_H
#define SWITCHYARD_MEMORY_DEVICEBACKEND_H

#include "switchyard/Memory/DequantMath.h"

#include <cstddef>
#include <string>

namespace switchyard::memory {

using Stream = void *;
using Event = void *;

enum class CopyKind { HostToDevice, DeviceToHost, DeviceToDevice };

class DeviceBackend {
public:
  virtual ~DeviceBackend() = default;
  virtual std::string name() const = 0;

  /// Device memory (one region, allocated once per pool) / pinned host memory.
  virtual void *allocateDevice(size_t bytes, std::string &error) = 0;
  virtual void freeDevice(void *p) = 0;
  virtual void *allocatePinned(size_t bytes, std::string &error) = 0;
  virtual void freePinned(void *p) = 0;

  /// The stream the layers compute on (owned by the backend).
  virtual Stream computeStream() = 0;
  virtual Stream createStream(std::string &error) = 0;
  virtual void destroyStream(Stream s) = 0;
  virtual Event createEvent(std::string &error) = 0;
  virtual void destroyEvent(Event e) = 0;

  /// Queued on `s`; returns at once (pinned host memory: truly asynchronous).
  virtual bool copyAsync(void *to, const void *from, size_t bytes, CopyKind kind, Stream s,
                         std::string &error) = 0;
  /// `e` completes when the work queued on `s` so far has.
  virtual bool record(Event e, Stream s, std::string &error) = 0;
  /// Work queued on `s` after this waits for `e` (on the device; the host goes on).
  virtual bool wait(Stream s, Event e, std::string &error) = 0;
  /// Whether `e` has completed, without waiting (false with `error` set on a failure).
  virtual bool done(Event e, std::string &error) = 0;
  /// Blocks the host until `s` is idle: tests and timing only, never the steady state.
  virtual bool synchronize(Stream s, std::string &error) = 0;

  /// out[i] = dequantAt(m, i) for every element of `m` (device memory both), on `s`.
  virtual bool dequantize(const PackedMatrix &m, float *out, Stream s,
                          std::string &error) = 0;
};

} // namespace switchyard::memory

#endif
