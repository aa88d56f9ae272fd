//===- expert_memory_gpu.cpp - device expert memory on a real GPU -----------===//
//
// The GPU check of device expert memory (switchyard/Memory/DeviceExperts.h over the CUDA
// layer's backend, switchyard/Executor/CudaExperts.h), one executable with pass/fail
// lines:
//   * experts migrate host (pinned) -> device at every precision (f32 and bf16 as the
//     checkpoint has them, int8, int4 with scales) through pools smaller than the
//     model, so slots are evicted and reused while the compute stream still works on
//     the previous version (the copy into a reused slot must wait for it);
//   * the device image equals the pinned one byte for byte (f32: also within 1e-6
//     relative), the dequantised staging buffers equal the host reference
//     (model::widenToFloat) bit for bit, and the expert's FFN through cuBLAS equals a
//     float64 host FFN on the same weights within 1e-4 relative;
//   * a budget that cannot hold one expert is a clear error;
//   * one expert of --timing-mb MB migrates R times: GB/s, and migrate() returns before
//     the copy lands (asynchronous: pinned memory, no host synchronisation).
// Without a GPU (no /dev/nvidiaN and no device) it prints `skipped: no GPU (...)` and
// exits 77; with a GPU that cannot be used (a missing CUDA library, ...) it fails with
// the reason. --json FILE writes the numbers and the checks.
//
//   expert-memory-gpu [--device N] [--json FILE] [--experts E] [--hidden H] [--width W]
//                     [--tokens T] [--timing-mb MB] [--repeats R]
//
//===----------------------------------------------------------------------===//
#include "switchyard/Cuda/DeviceNodes.h"
#include "switchyard/Executor/CudaExperts.h"
#include "switchyard/Executor/CudaLayer.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>

using namespace switchyard;
using namespace switchyard::memory;
using Clock = std::chrono::steady_clock;

namespace {

struct Options {
  int device = 0;
  std::string json;
  int64_t experts = 6, hidden = 256, width = 384, tokens = 5, timingMb = 256, repeats = 8;
};

nlohmann::json report = {{"checks", nlohmann::json::array()}};
int failures = 0;

void check(bool ok, const std::string &what, const std::string &detail = "") {
  std::printf("%s %s%s%s\n", ok ? "PASS" : "FAIL", what.c_str(), detail.empty() ? "" : ": ",
              detail.c_str());
  report["checks"].push_back({{"check", what}, {"passed", ok}, {"detail", detail}});
  failures += !ok;
}

int nvidiaDevices() { return switchyard::cuda::nvidiaDeviceNodes(); }

uint32_t bitsOf(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

/// Random experts in float32 and their bf16 rounding (truncated to the upper half).
struct HostExperts {
  std::vector<std::vector<float>> f32;
  std::vector<std::vector<uint16_t>> bf16;
  std::vector<model::TensorView> f32Views, bf16Views;
  std::vector<exec::FfnWeights> f32Weights, bf16Weights;
  HostExperts(int64_t count, int64_t hidden, int64_t width, unsigned seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f / std::sqrt(float(hidden)));
    f32.resize(size_t(3 * count));
    bf16.resize(size_t(3 * count));
    f32Views.resize(size_t(3 * count));
    bf16Views.resize(size_t(3 * count));
    for (size_t i = 0; i < f32.size(); ++i) {
      const int j = int(i % 3);
      f32[i].resize(size_t(hidden * width));
      bf16[i].resize(f32[i].size());
      for (size_t k = 0; k < f32[i].size(); ++k) {
        f32[i][k] = normal(rng);
        bf16[i][k] = uint16_t(bitsOf(f32[i][k]) >> 16);
      }
      for (int b = 0; b < 2; ++b) {
        model::TensorView &v = b ? bf16Views[i] : f32Views[i];
        v.name = "experts." + std::to_string(i / 3) +
                 (j == 0   ? ".gate"
                  : j == 1 ? ".up"
                           : ".down");
        v.dtype = b ? model::DType::BF16 : model::DType::F32;
        v.dtypeText = b ? "BF16" : "F32";
        v.shape = j == 2 ? std::vector<int64_t>{hidden, width}
                         : std::vector<int64_t>{width, hidden};
        v.data = b ? reinterpret_cast<const uint8_t *>(bf16[i].data())
                   : reinterpret_cast<const uint8_t *>(f32[i].data());
        v.bytes = f32[i].size() * (b ? 2 : 4);
      }
    }
    for (int64_t e = 0; e < count; ++e) {
      f32Weights.push_back({&f32Views[size_t(3 * e)], &f32Views[size_t(3 * e + 1)],
                            &f32Views[size_t(3 * e + 2)]});
      bf16Weights.push_back({&bf16Views[size_t(3 * e)], &bf16Views[size_t(3 * e + 1)],
                             &bf16Views[size_t(3 * e + 2)]});
    }
  }
};

/// The expert's FFN in float64 on the host from its (already widened) weights.
std::vector<double> hostFfn(const std::vector<float> w[3], const float *x, int64_t n,
                            int64_t hidden, int64_t width) {
  std::vector<double> y(static_cast<size_t>(n * hidden), 0.0),
      h(static_cast<size_t>(width));
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t r = 0; r < width; ++r) {
      double g = 0, u = 0;
      for (int64_t c = 0; c < hidden; ++c) {
        g += double(w[0][size_t(r * hidden + c)]) * x[t * hidden + c];
        u += double(w[1][size_t(r * hidden + c)]) * x[t * hidden + c];
      }
      h[size_t(r)] = g / (1.0 + std::exp(-g)) * u;
    }
    for (int64_t r = 0; r < hidden; ++r) {
      double s = 0;
      for (int64_t c = 0; c < width; ++c)
        s += double(w[2][size_t(r * width + c)]) * h[size_t(c)];
      y[size_t(t * hidden + r)] = s;
    }
  }
  return y;
}

/// Pinned host memory of the backend, freed with this.
struct Pinned {
  DeviceBackend &backend;
  uint8_t *p = nullptr;
  Pinned(DeviceBackend &b, size_t bytes, std::string &error)
      : backend(b), p(static_cast<uint8_t *>(b.allocatePinned(bytes, error))) {}
  ~Pinned() {
    if (p)
      backend.freePinned(p);
  }
};
struct Device {
  DeviceBackend &backend;
  uint8_t *p = nullptr;
  Device(DeviceBackend &b, size_t bytes, std::string &error)
      : backend(b), p(static_cast<uint8_t *>(b.allocateDevice(bytes, error))) {}
  ~Device() {
    if (p)
      backend.freeDevice(p);
  }
};

/// One instance's experts at `p` through a window of two resident versions: migrate,
/// acquire, read back image and dequantised staging, run the FFN, evict the previous
/// one (the next migration reuses its slot while the FFN may still run); compared
/// after one synchronisation at the end.
void roundTrips(const std::shared_ptr<void> &device, DeviceBackend &backend,
                DeviceExperts &d, const std::vector<exec::FfnWeights> &source, Precision p,
                const char *label, const Options &o) {
  std::string error;
  const VersionLayout &layout = d.layout(p);
  const int64_t E = d.experts(), H = o.hidden, W = o.width, n = o.tokens;
  const size_t imageBytes = layout.bytes, partFloats = size_t(H * W);
  const size_t perExpert = imageBytes + 3 * partFloats * 4 + size_t(n * H) * 4;
  Pinned results(backend, perExpert * size_t(E), error);
  Device staging(backend, 3 * partFloats * 4, error);
  Device xy(backend, size_t(n * H) * 4 * (1 + size_t(E)), error);
  if (!results.p || !staging.p || !xy.p) {
    check(false, std::string(label) + ": buffers", error);
    return;
  }
  std::vector<float> x(size_t(n * H));
  std::mt19937 rng(9);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float &v : x)
    v = normal(rng);
  Stream compute = backend.computeStream();
  float *xDev = reinterpret_cast<float *>(xy.p);
  bool ok = backend.copyAsync(xDev, x.data(), x.size() * 4, CopyKind::HostToDevice, compute,
                              error) &&
            backend.synchronize(compute, error);
  int64_t prev = -1, reusedSlots = 0;
  std::vector<int32_t> slots;
  for (int64_t e = 0; ok && e < E; ++e) {
    uint8_t *mine = results.p + perExpert * size_t(e);
    float *stagingOut = reinterpret_cast<float *>(mine + imageBytes);
    float *yHost = stagingOut + 3 * partFloats;
    float *yDev = xDev + size_t(n * H) * size_t(1 + e);
    float *st[3] = {reinterpret_cast<float *>(staging.p),
                    reinterpret_cast<float *>(staging.p) + partFloats,
                    reinterpret_cast<float *>(staging.p) + 2 * partFloats};
    const float *resolved[3];
    DeviceExpert expert;
    ok = d.migrate(e, p, error) && d.acquire(e, p, compute, expert, error) &&
         backend.copyAsync(mine, expert.image, imageBytes, CopyKind::DeviceToHost, compute,
                           error) &&
         resolveExpert(backend, expert, st, resolved, compute, error);
    for (int j = 0; ok && j < 3; ++j)
      ok = backend.copyAsync(stagingOut + size_t(j) * partFloats, resolved[j],
                             partFloats * 4, CopyKind::DeviceToHost, compute, error);
    ok = ok && exec::cudaExpertFfn(device, expert, xDev, n, yDev, error) &&
         backend.copyAsync(yHost, yDev, size_t(n * H) * 4, CopyKind::DeviceToHost, compute,
                           error);
    if (ok && prev >= 0)
      ok = d.evict(prev, p, compute, error);
    reusedSlots += std::find(slots.begin(), slots.end(), expert.slot) != slots.end();
    slots.push_back(expert.slot);
    prev = e;
  }
  ok = ok && d.evict(prev, p, compute, error) && backend.synchronize(compute, error);
  check(ok,
        std::string(label) + ": migrate, acquire, dequantise, FFN and evict every expert",
        ok ? "" : error);
  if (!ok)
    return;
  check(reusedSlots > 0 || d.devicePool(p).blocks() >= E,
        std::string(label) + ": slots are reused",
        std::to_string(reusedSlots) + " of " + std::to_string(E) +
            " migrations into a used slot");
  double imageRel = 0, ffnRel = 0;
  bool imageSame = true, dequantSame = true;
  for (int64_t e = 0; e < E; ++e) {
    const uint8_t *mine = results.p + perExpert * size_t(e);
    const float *stagingOut = reinterpret_cast<const float *>(mine + imageBytes);
    const float *yHost = stagingOut + 3 * partFloats;
    imageSame = imageSame && std::memcmp(mine, d.hostImage(e, p), imageBytes) == 0;
    VersionImage ref;
    if (!makeVersion(source[size_t(e)], p, layout.group, ref, error)) {
      check(false, std::string(label) + ": host reference", error);
      return;
    }
    if (layout.parts[0].dtype == model::DType::F32) // the f32 round trip
      for (int j = 0; j < 3; ++j) {
        const float *back = reinterpret_cast<const float *>(mine + layout.parts[j].offset);
        const model::TensorView *src[3] = {source[size_t(e)].gate, source[size_t(e)].up,
                                           source[size_t(e)].down};
        const float *orig = reinterpret_cast<const float *>(src[j]->data);
        for (size_t k = 0; k < partFloats; ++k)
          imageRel = std::max(imageRel, std::fabs(double(back[k]) - orig[k]) /
                                            std::max(1e-30, std::fabs(double(orig[k]))));
      }
    std::vector<float> w[3];
    for (int j = 0; j < 3; ++j) {
      w[j].resize(partFloats);
      model::widenToFloat(ref.views[j], 0, int64_t(partFloats), w[j].data());
      for (size_t k = 0; k < partFloats && dequantSame; ++k)
        dequantSame = bitsOf(stagingOut[size_t(j) * partFloats + k]) == bitsOf(w[j][k]);
    }
    std::vector<double> want = hostFfn(w, x.data(), n, H, W);
    double err = 0, scale = 0;
    for (size_t k = 0; k < want.size(); ++k) {
      err = std::max(err, std::fabs(yHost[k] - want[k]));
      scale = std::max(scale, std::fabs(want[k]));
    }
    ffnRel = std::max(ffnRel, err / std::max(scale, 1e-30));
  }
  const std::string key = label;
  report["precisions"][key] = {{"version_bytes", imageBytes},
                               {"slots", d.devicePool(p).blocks()},
                               {"image_exact", imageSame},
                               {"dequant_exact", dequantSame},
                               {"ffn_max_rel_err", ffnRel}};
  check(imageSame, key + ": device image equals the pinned host version byte for byte");
  if (layout.parts[0].dtype == model::DType::F32) {
    report["precisions"][key]["f32_round_trip_max_rel_err"] = imageRel;
    char rel[64];
    std::snprintf(rel, sizeof rel, "max relative error %.3g", imageRel);
    check(imageRel <= 1e-6, key + ": f32 round trip within 1e-6 relative", rel);
  }
  check(dequantSame, key + ": dequantised weights equal the host reference bit for bit");
  char text[64];
  std::snprintf(text, sizeof text, "max relative error %.3g", ffnRel);
  check(ffnRel <= 1e-4, key + ": expert FFN (cuBLAS) equals the host FFN within 1e-4",
        text);
}

/// One big f32 expert migrated `repeats` times back to back: GB/s and asynchrony.
void timeMigration(DeviceBackend &backend, const Options &o) {
  std::string error;
  const int64_t hidden = 2048;
  const int64_t width = std::max<int64_t>(1, o.timingMb * (1 << 20) / (3 * hidden * 4));
  HostExperts big(1, hidden, width, 5);
  DeviceExpertsOptions options;
  options.precisions = {Precision::High};
  options.budgetBytes = 3 * hidden * width * 4;
  auto d = DeviceExperts::create(backend, big.f32Weights, options, error);
  if (!d) {
    check(false, "timing: device expert memory", error);
    return;
  }
  const double bytes = double(d->layout(Precision::High).bytes);
  // Warm-up (first-touch costs), then the timed copies back to back.
  bool ok = d->migrate(0, Precision::High, error) &&
            d->evict(0, Precision::High, nullptr, error) &&
            backend.synchronize(d->migrationStream(), error);
  double issueSeconds = 0;
  bool landedAtReturn = true;
  const auto start = Clock::now();
  for (int64_t r = 0; ok && r < o.repeats; ++r) {
    const auto before = Clock::now();
    ok = d->migrate(0, Precision::High, error);
    issueSeconds = std::max(issueSeconds,
                            std::chrono::duration<double>(Clock::now() - before).count());
    bool landed = false;
    if (ok && r == 0)
      ok = d->landed(0, Precision::High, landed, error);
    if (r == 0)
      landedAtReturn = landed;
    ok = ok && d->evict(0, Precision::High, nullptr, error);
  }
  ok = ok && backend.synchronize(d->migrationStream(), error);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  check(ok,
        "timing: " + std::to_string(o.repeats) + " migrations of " +
            std::to_string(int64_t(bytes) >> 20) + " MiB",
        ok ? "" : error);
  if (!ok)
    return;
  const double gbps = bytes * double(o.repeats) / seconds / 1e9;
  const double perCopy = seconds / double(o.repeats);
  char text[160];
  std::snprintf(text, sizeof text, "%.1f GB/s host -> device (%.2f ms per %.0f MiB copy)",
                gbps, perCopy * 1e3, bytes / (1 << 20));
  std::printf("     %s\n", text);
  report["migration"] = {{"bytes", int64_t(bytes)},
                         {"repeats", o.repeats},
                         {"seconds", seconds},
                         {"gb_per_s", gbps},
                         {"max_issue_seconds", issueSeconds},
                         {"landed_at_return", landedAtReturn}};
  std::snprintf(text, sizeof text, "migrate() returned in %.1f us, a copy takes %.2f ms",
                issueSeconds * 1e6, perCopy * 1e3);
  check(!landedAtReturn && issueSeconds < perCopy / 2,
        "timing: migrate() returns before the copy lands (asynchronous, no host sync)",
        text);
  check(gbps > 1.0, "timing: the migration runs at more than 1 GB/s (pinned memory)", text);
}

bool parse(int argc, char **argv, Options &o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](int64_t &out) {
      if (i + 1 >= argc)
        return false;
      char *end = nullptr;
      out = std::strtoll(argv[++i], &end, 10);
      return *end == 0 && out > 0;
    };
    int64_t n = 0;
    if (a == "--json" && i + 1 < argc)
      o.json = argv[++i];
    else if (a == "--device" && i + 1 < argc)
      o.device = std::atoi(argv[++i]);
    else if (a == "--experts"     ? value(o.experts)
             : a == "--hidden"    ? value(o.hidden)
             : a == "--width"     ? value(o.width)
             : a == "--tokens"    ? value(o.tokens)
             : a == "--timing-mb" ? value(o.timingMb)
             : a == "--repeats"   ? value(o.repeats)
                                  : (n = -1, false))
      continue;
    else {
      std::fprintf(stderr, "expert-memory-gpu: bad argument '%s'%s\n", a.c_str(),
                   n < 0 ? "" : " (a positive integer follows it)");
      std::fprintf(
          stderr, "usage: expert-memory-gpu [--device N] [--json FILE] [--experts E] "
                  "[--hidden H] [--width W] [--tokens T] [--timing-mb MB] [--repeats R]\n");
      return false;
    }
  }
  if (o.experts < 3) {
    std::fprintf(stderr,
                 "expert-memory-gpu: --experts must be at least 3 (slots are reused)\n");
    return false;
  }
  return true;
}

void writeJson(const Options &o) {
  if (o.json.empty())
    return;
  report["passed"] = failures == 0 && !report.contains("skipped");
  report["failures"] = failures;
  std::ofstream out(o.json);
  out << report.dump(2) << "\n";
  if (!out)
    std::fprintf(stderr, "expert-memory-gpu: cannot write %s\n", o.json.c_str());
}

} // namespace

int main(int argc, char **argv) {
  Options o;
  if (!parse(argc, argv, o))
    return 2;
  std::string error;
  std::shared_ptr<void> device = exec::openCudaDevice(o.device, error);
  if (!device) {
    if (nvidiaDevices() == 0) { // nothing to test here: reported as skipped
      std::printf("skipped: no GPU (%s)\n", error.c_str());
      report["skipped"] = error;
      writeJson(o);
      return 77;
    }
    check(false, "open the GPU (this machine has /dev/nvidiaN)", error);
    writeJson(o);
    return 1;
  }
  std::unique_ptr<DeviceBackend> backend = exec::openCudaBackend(device, error);
  if (!backend) {
    check(false, "the CUDA backend of device expert memory", error);
    writeJson(o);
    return 1;
  }
  report["device"] = backend->name();
  report["shape"] = {{"experts", o.experts},
                     {"hidden", o.hidden},
                     {"width", o.width},
                     {"tokens", o.tokens}};
  HostExperts host(o.experts, o.hidden, o.width, 1);
  const int64_t hiBytes = 3 * o.hidden * o.width * 4;

  DeviceExpertsOptions tooSmall;
  tooSmall.budgetBytes = hiBytes / 8;
  check(!DeviceExperts::create(*backend, host.f32Weights, tooSmall, error) &&
            error.find("cannot hold one") != std::string::npos,
        "a budget that cannot hold one expert is a clear error", error);

  DeviceExpertsOptions options; // two f32 versions: the f32 pool reuses its slots
  options.budgetBytes = 2 * hiBytes + hiBytes / 2;
  auto f32 = DeviceExperts::create(*backend, host.f32Weights, options, error);
  check(bool(f32), "device pools over f32 experts (hi, int8, int4)", f32 ? "" : error);
  if (f32) {
    roundTrips(device, *backend, *f32, host.f32Weights, Precision::High, "f32", o);
    roundTrips(device, *backend, *f32, host.f32Weights, Precision::Int8, "int8", o);
    roundTrips(device, *backend, *f32, host.f32Weights, Precision::Int4, "int4", o);
    f32.reset();
  }
  options.precisions = {Precision::High};
  options.budgetBytes = hiBytes; // two bf16 versions
  auto bf16 = DeviceExperts::create(*backend, host.bf16Weights, options, error);
  check(bool(bf16), "device pools over bf16 experts", bf16 ? "" : error);
  if (bf16)
    roundTrips(device, *backend, *bf16, host.bf16Weights, Precision::High, "bf16", o);
  bf16.reset();
  timeMigration(*backend, o);
  writeJson(o);
  std::printf("%s: %d check(s) failed\n", failures ? "FAILED" : "PASSED", failures);
  return failures ? 1 : 0;
}
