//===- FakeDevice.h - a DeviceBackend on the host that records what it does -===//
//
// "Device" and "pinned" memory are host memory, copies and dequantisation run at once
// (dequantAt, the code the CUDA kernel runs), and every operation is appended to `log`
// in a readable form ("copy h2d dev0+512 <- pin1+0 1024 on s1", "record e3 on s1",
// "wait s0 on e3"), regions named devN / pinN in allocation order, streams sN (s0 the
// compute stream) and events eN. Tests read the log as the sequence of operations a GPU
// would have been given. `failNext` makes the next call of that name fail.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_UNITTESTS_FAKEDEVICE_H
#define SWITCHYARD_UNITTESTS_FAKEDEVICE_H

#include "switchyard/Memory/DeviceBackend.h"

#include <cstdlib>
#include <map>
#include <set>
#include <vector>

namespace switchyard::memory::testing {

class FakeDevice : public DeviceBackend {
public:
  std::vector<std::string> log;
  std::string failNext; // "allocateDevice", "allocatePinned", "copyAsync", ...
  int64_t deviceBytes = 0, pinnedBytes = 0, liveEvents = 0, liveStreams = 0;
  int64_t synchronizations = 0;

  ~FakeDevice() override {
    for (auto &r : regions)
      std::free(r.second.base);
  }
  std::string name() const override { return "fake"; }

  void *allocateDevice(size_t bytes, std::string &error) override {
    return allocate("dev", bytes, deviceBytes, "allocateDevice", error);
  }
  void freeDevice(void *p) override { release(p, deviceBytes); }
  void *allocatePinned(size_t bytes, std::string &error) override {
    return allocate("pin", bytes, pinnedBytes, "allocatePinned", error);
  }
  void freePinned(void *p) override { release(p, pinnedBytes); }

  Stream computeStream() override { return handle(0); }
  Stream createStream(std::string &error) override {
    if (fails("createStream", error))
      return nullptr;
    ++liveStreams;
    return handle(++streams);
  }
  void destroyStream(Stream) override { --liveStreams; }
  Event createEvent(std::string &error) override {
    if (fails("createEvent", error))
      return nullptr;
    ++liveEvents;
    return handle(++events);
  }
  void destroyEvent(Event) override { --liveEvents; }

  bool copyAsync(void *to, const void *from, size_t bytes, CopyKind kind, Stream s,
                 std::string &error) override {
    if (fails("copyAsync", error))
      return false;
    static const char *kinds[] = {"h2d", "d2h", "d2d"};
    log.push_back(std::string("copy ") + kinds[int(kind)] + " " + where(to) + " <- " +
                  where(from) + " " + std::to_string(bytes) + " on s" + id(s));
    std::memcpy(to, from, bytes);
    return true;
  }
  bool record(Event e, Stream s, std::string &error) override {
    if (fails("record", error))
      return false;
    log.push_back("record e" + id(e) + " on s" + id(s));
    return true;
  }
  bool wait(Stream s, Event e, std::string &error) override {
    if (fails("wait", error))
      return false;
    log.push_back("wait s" + id(s) + " on e" + id(e));
    return true;
  }
  bool done(Event, std::string &error) override { return !fails("done", error); }
  bool synchronize(Stream, std::string &) override {
    ++synchronizations;
    return true;
  }
  bool dequantize(const PackedMatrix &m, float *out, Stream s,
                  std::string &error) override {
    if (fails("dequantize", error))
      return false;
    log.push_back("dequantize " + where(m.data) + " on s" + id(s));
    for (int64_t i = 0; i < m.rows * m.cols; ++i)
      out[i] = dequantAt(m, i);
    return true;
  }

  /// The log's entries that start with `prefix`.
  std::vector<std::string> only(const std::string &prefix) const {
    std::vector<std::string> out;
    for (const std::string &line : log)
      if (line.compare(0, prefix.size(), prefix) == 0)
        out.push_back(line);
    return out;
  }

private:
  struct Region {
    std::string name;
    uint8_t *base;
    size_t bytes;
  };
  std::map<const uint8_t *, Region> regions; // by base
  int counters[2] = {0, 0};
  uintptr_t streams = 0, events = 0;

  static void *handle(uintptr_t n) { return reinterpret_cast<void *>((n << 4) | 1); }
  static std::string id(void *h) {
    return std::to_string(reinterpret_cast<uintptr_t>(h) >> 4);
  }

  bool fails(const char *what, std::string &error) {
    if (failNext != what)
      return false;
    failNext.clear();
    error = std::string("fake ") + what + " failure";
    return true;
  }
  void *allocate(const char *prefix, size_t bytes, int64_t &total, const char *what,
                 std::string &error) {
    if (fails(what, error))
      return nullptr;
    auto *p = static_cast<uint8_t *>(std::aligned_alloc(256, (bytes + 255) / 256 * 256));
    const int n = counters[prefix[0] == 'p']++;
    regions[p] = {prefix + std::to_string(n), p, bytes};
    total += int64_t(bytes);
    log.push_back(std::string("allocate ") + prefix + std::to_string(n) + " " +
                  std::to_string(bytes));
    return p;
  }
  void release(void *p, int64_t &total) {
    auto it = regions.find(static_cast<uint8_t *>(p));
    if (it == regions.end())
      return;
    log.push_back("free " + it->second.name);
    total -= int64_t(it->second.bytes);
    std::free(it->second.base);
    regions.erase(it);
  }
  /// "dev0+512": the region and offset of a pointer (or "host").
  std::string where(const void *p) const {
    auto *b = static_cast<const uint8_t *>(p);
    auto it = regions.upper_bound(b);
    if (it != regions.begin()) {
      --it;
      if (b < it->second.base + it->second.bytes)
        return it->second.name + "+" + std::to_string(b - it->second.base);
    }
    return "host";
  }
};

} // namespace switchyard::memory::testing

#endif
