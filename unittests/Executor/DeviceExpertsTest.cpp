//===- DeviceExpertsTest.cpp - device pools and migrations on a fake device -===//
//
// DeviceExperts over FakeDevice (FakeDevice.h): the regions are allocated once (pinned
// host tier and one device pool per precision), slots come from BlockPool's free list
// under one budget and are reused, and the operations a GPU would be given come in the
// order the design needs - copy then LANDED event on the migration stream, the compute
// stream waiting on it once, RELEASED recorded on the compute stream at eviction and
// waited on by the next copy into that slot - with no host synchronisation. Migrated
// versions resolve to the host reference (f32 in place, int8 / int4 dequantised exactly).
//
//===----------------------------------------------------------------------===//
#include "switchyard/Memory/DeviceExperts.h"
#include "FakeDevice.h"

#include <gtest/gtest.h>

#include <random>

// A namespace of its own: unity builds put several test files in one
// translation unit (scripts/build-sanitized.sh).
namespace device_experts_test {

using namespace switchyard;
using namespace switchyard::memory;
using switchyard::memory::testing::FakeDevice;

namespace {

/// `count` random float32 experts (hidden 32, width 16).
struct Experts {
  static constexpr int64_t hidden = 32, width = 16;
  std::vector<std::vector<float>> data;
  std::vector<model::TensorView> views;
  std::vector<exec::FfnWeights> weights;
  explicit Experts(int64_t count) {
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    data.resize(size_t(count * 3));
    views.resize(size_t(count * 3));
    for (size_t i = 0; i < data.size(); ++i) {
      const bool down = i % 3 == 2;
      data[i].resize(size_t(hidden * width));
      for (float &x : data[i])
        x = normal(rng);
      model::TensorView &v = views[i];
      v.name = "experts." + std::to_string(i / 3) +
               (i % 3 == 0   ? ".gate"
                : i % 3 == 1 ? ".up"
                             : ".down");
      v.dtype = model::DType::F32;
      v.dtypeText = "F32";
      v.shape =
          down ? std::vector<int64_t>{hidden, width} : std::vector<int64_t>{width, hidden};
      v.data = reinterpret_cast<const uint8_t *>(data[i].data());
      v.bytes = data[i].size() * 4;
    }
    for (int64_t e = 0; e < count; ++e)
      weights.push_back(
          {&views[size_t(3 * e)], &views[size_t(3 * e + 1)], &views[size_t(3 * e + 2)]});
  }
};

size_t versionBytes(const Experts &x, Precision p) {
  VersionLayout layout;
  std::string error;
  EXPECT_TRUE(layoutVersion(x.weights[0], p, 0, layout, error)) << error;
  return layout.bytes;
}

TEST(Pools, RegionBlocksSliceOneRegionAndTheFreeListReusesSlots) {
  alignas(256) static uint8_t region[4 * 512];
  BudgetTracker budget(3 * 500);
  BlockPool pool("device_hi", 500, 4, budget,
                 std::make_unique<RegionBlocks>(
                     "device", region, RegionBlocks::strideFor(500), nullptr, nullptr));
  EXPECT_STREQ(pool.memoryKind(), "device");
  EXPECT_EQ(RegionBlocks::strideFor(500), 512u);
  int32_t a = pool.allocate(), b = pool.allocate(), c = pool.allocate();
  EXPECT_EQ(a, 0);
  EXPECT_EQ(pool.data(b), region + 512 * size_t(b));
  EXPECT_EQ(pool.allocate(), -1) << "the budget holds three";
  EXPECT_EQ(budget.used(), 1500);
  pool.free(b);
  EXPECT_FALSE(pool.allocated(b));
  EXPECT_EQ(pool.allocate(), b) << "the freed slot comes back first";
  EXPECT_TRUE(pool.allocated(c));
}

TEST(DeviceExperts, RegionsAreAllocatedOncePerPrecisionAndSizedByTheBudget) {
  Experts x(5);
  FakeDevice fake;
  const size_t hi = versionBytes(x, Precision::High);
  DeviceExpertsOptions options;
  options.budgetBytes = int64_t(2 * hi + 10);
  std::string error;
  auto d = DeviceExperts::create(fake, x.weights, options, error);
  ASSERT_TRUE(d) << error;
  EXPECT_EQ(fake.only("allocate dev").size(), 3u);
  EXPECT_EQ(fake.only("allocate pin").size(), 3u);
  EXPECT_EQ(d->devicePool(Precision::High).blocks(), 2);
  EXPECT_EQ(d->devicePool(Precision::Int8).blocks(), 5) << "int8 versions are smaller";
  EXPECT_STREQ(d->devicePool(Precision::Int4).memoryKind(), "device");
  EXPECT_EQ(fake.liveStreams, 1) << "one migration stream";
  // The pinned tier holds every expert's packed version.
  VersionImage ref;
  ASSERT_TRUE(makeVersion(x.weights[3], Precision::Int4, 0, ref, error)) << error;
  EXPECT_EQ(
      std::memcmp(d->hostImage(3, Precision::Int4), ref.bytes.data(), ref.bytes.size()), 0);
  d.reset();
  EXPECT_EQ(fake.deviceBytes, 0);
  EXPECT_EQ(fake.pinnedBytes, 0);
  EXPECT_EQ(fake.liveEvents, 0);
  EXPECT_EQ(fake.liveStreams, 0);
}

TEST(DeviceExperts, ABudgetThatCannotHoldOneExpertIsAClearError) {
  Experts x(2);
  FakeDevice fake;
  DeviceExpertsOptions options;
  options.budgetBytes = int64_t(versionBytes(x, Precision::High)) - 1;
  std::string error;
  EXPECT_FALSE(DeviceExperts::create(fake, x.weights, options, error));
  EXPECT_NE(error.find("cannot hold one hi expert version"), std::string::npos) << error;
  options.budgetBytes = 0;
  EXPECT_FALSE(DeviceExperts::create(fake, x.weights, options, error));
  EXPECT_NE(error.find("must be positive"), std::string::npos) << error;
  EXPECT_EQ(fake.deviceBytes + fake.pinnedBytes, 0);
}

TEST(DeviceExperts, BackendFailuresAreErrorsAndLeakNothing) {
  Experts x(3);
  DeviceExpertsOptions options;
  options.budgetBytes = 1 << 20;
  for (const char *what :
       {"allocatePinned", "allocateDevice", "createEvent", "createStream"}) {
    FakeDevice fake;
    fake.failNext = what;
    std::string error;
    EXPECT_FALSE(DeviceExperts::create(fake, x.weights, options, error)) << what;
    EXPECT_NE(error.find(std::string("fake ") + what + " failure"), std::string::npos)
        << error;
    EXPECT_EQ(fake.deviceBytes + fake.pinnedBytes + fake.liveEvents + fake.liveStreams, 0)
        << what;
  }
  FakeDevice fake;
  std::string error;
  auto d = DeviceExperts::create(fake, x.weights, options, error);
  ASSERT_TRUE(d) << error;
  fake.failNext = "copyAsync";
  EXPECT_FALSE(d->migrate(1, Precision::Int8, error));
  EXPECT_FALSE(d->resident(1, Precision::Int8));
  EXPECT_EQ(d->budget().used(), 0) << "a failed copy gives its slot back";
}

TEST(DeviceExperts, MigrationsAreOrderedByEventsWithoutHostSynchronisation) {
  Experts x(4);
  FakeDevice fake;
  DeviceExpertsOptions options;
  options.precisions = {Precision::High};
  const size_t hi = versionBytes(x, Precision::High), stride = RegionBlocks::strideFor(hi);
  options.budgetBytes = int64_t(2 * hi);
  std::string error;
  auto d = DeviceExperts::create(fake, x.weights, options, error);
  ASSERT_TRUE(d) << error;
  Stream compute = fake.computeStream();
  fake.log.clear();
  // Slots 0 and 1 (free list: lowest first); events: e1 e2 landed / released of slot 0,
  // e3 e4 of slot 1; s1 the migration stream, s0 the compute stream.
  ASSERT_TRUE(d->migrate(0, Precision::High, error)) << error;
  ASSERT_TRUE(d->migrate(2, Precision::High, error)) << error;
  DeviceExpert a, again;
  ASSERT_TRUE(d->acquire(0, Precision::High, compute, a, error)) << error;
  ASSERT_TRUE(d->acquire(0, Precision::High, compute, again, error)) << error;
  EXPECT_FALSE(d->migrate(1, Precision::High, error)) << "two slots under this budget";
  EXPECT_NE(error.find("evict first"), std::string::npos) << error;
  ASSERT_TRUE(d->evict(0, Precision::High, compute, error)) << error;
  ASSERT_TRUE(d->migrate(1, Precision::High, error)) << error;
  const std::string bytes = std::to_string(hi), pin = "pin0+";
  std::vector<std::string> expected = {
      "copy h2d dev0+0 <- pin0+0 " + bytes + " on s1",
      "record e1 on s1",
      "copy h2d dev0+" + std::to_string(stride) + " <- pin0+" + std::to_string(2 * stride) +
          " " + bytes + " on s1",
      "record e3 on s1",
      "wait s0 on e1", // once per landing and stream
      "record e2 on s0",
      "wait s1 on e2", // the copy into the reused slot waits for the compute stream
      "copy h2d dev0+0 <- pin0+" + std::to_string(stride) + " " + bytes + " on s1",
      "record e1 on s1",
  };
  EXPECT_EQ(fake.log, expected);
  EXPECT_EQ(a.slot, 0);
  EXPECT_EQ(d->counters().migrations, 3);
  EXPECT_EQ(d->counters().refused, 1);
  EXPECT_EQ(d->counters().waits, 2);
  EXPECT_EQ(fake.synchronizations, 0) << "the steady state never blocks the host";
  EXPECT_LE(d->budget().peak(), d->budget().budget());
}

TEST(DeviceExperts, AVersionNeverUsedIsEvictedWithoutAnEvent) {
  Experts x(2);
  FakeDevice fake;
  DeviceExpertsOptions options;
  options.precisions = {Precision::Int8};
  options.budgetBytes = int64_t(versionBytes(x, Precision::Int8));
  std::string error;
  auto d = DeviceExperts::create(fake, x.weights, options, error);
  ASSERT_TRUE(d) << error;
  fake.log.clear();
  ASSERT_TRUE(d->migrate(0, Precision::Int8, error)) << error; // a prefetch not needed
  ASSERT_TRUE(d->evict(0, Precision::Int8, fake.computeStream(), error)) << error;
  ASSERT_TRUE(d->migrate(1, Precision::Int8, error)) << error;
  EXPECT_TRUE(fake.only("wait").empty());
  EXPECT_EQ(fake.only("record").size(), 2u);
  bool landed = false;
  EXPECT_TRUE(d->landed(1, Precision::Int8, landed, error)) << error;
  EXPECT_TRUE(landed);
  DeviceExpert none;
  EXPECT_FALSE(d->acquire(0, Precision::Int8, fake.computeStream(), none, error));
  EXPECT_NE(error.find("migrate it first"), std::string::npos) << error;
}

TEST(DeviceExperts, ResolvedVersionsEqualTheHostReference) {
  Experts x(3);
  FakeDevice fake;
  DeviceExpertsOptions options;
  options.budgetBytes = 1 << 20;
  std::string error;
  auto d = DeviceExperts::create(fake, x.weights, options, error);
  ASSERT_TRUE(d) << error;
  Stream compute = fake.computeStream();
  for (Precision p : {Precision::High, Precision::Int8, Precision::Int4}) {
    ASSERT_TRUE(d->migrate(2, p, error)) << error;
    DeviceExpert expert;
    ASSERT_TRUE(d->acquire(2, p, compute, expert, error)) << error;
    std::vector<float> staging[3];
    float *buffers[3];
    for (int j = 0; j < 3; ++j) {
      staging[j].assign(size_t(expert.views[j].numel()), -1.0f);
      buffers[j] = staging[j].data();
    }
    const float *resolved[3];
    fake.log.clear();
    ASSERT_TRUE(resolveExpert(fake, expert, buffers, resolved, compute, error)) << error;
    VersionImage ref;
    ASSERT_TRUE(makeVersion(x.weights[2], p, 0, ref, error)) << error;
    for (int j = 0; j < 3; ++j) {
      std::vector<float> want(size_t(ref.views[j].numel()));
      model::widenToFloat(ref.views[j], 0, ref.views[j].numel(), want.data());
      ASSERT_EQ(std::memcmp(resolved[j], want.data(), want.size() * 4), 0)
          << precisionName(p) << " part " << j;
      if (p == Precision::High) {
        EXPECT_EQ(resolved[j], reinterpret_cast<const float *>(expert.views[j].data))
            << "f32 is read in place";
      }
    }
    EXPECT_EQ(fake.only("dequantize").size(), p == Precision::High ? 0u : 3u);
  }
}

TEST(DeviceExperts, RandomTrafficKeepsSlotsAndBudgetConsistent) {
  Experts x(6);
  FakeDevice fake;
  DeviceExpertsOptions options;
  options.budgetBytes =
      int64_t(versionBytes(x, Precision::High) + 2 * versionBytes(x, Precision::Int4));
  std::string error;
  auto d = DeviceExperts::create(fake, x.weights, options, error);
  ASSERT_TRUE(d) << error;
  std::mt19937 rng(3);
  const Precision ps[3] = {Precision::High, Precision::Int8, Precision::Int4};
  for (int step = 0; step < 2000; ++step) {
    const int64_t e = int64_t(rng() % 6);
    const Precision p = ps[rng() % 3];
    DeviceExpert got;
    switch (rng() % 3) {
    case 0:
      d->migrate(e, p, error);
      break;
    case 1:
      if (d->resident(e, p)) {
        ASSERT_TRUE(d->acquire(e, p, fake.computeStream(), got, error)) << error;
        ASSERT_EQ(std::memcmp(got.image, d->hostImage(e, p), d->layout(p).bytes), 0);
      }
      break;
    default: {
      ASSERT_TRUE(d->evict(e, p, fake.computeStream(), error)) << error;
    }
    }
    ASSERT_LE(d->budget().used(), d->budget().budget());
    int64_t inUse = 0; // every resident version holds exactly one slot
    for (Precision q : ps) {
      int64_t resident = 0;
      for (int64_t k = 0; k < 6; ++k)
        resident += d->resident(k, q);
      const BlockPool &pool = d->devicePool(q);
      ASSERT_EQ(resident, pool.blocks() - pool.freeBlocks());
      inUse += resident * int64_t(pool.blockBytes());
    }
    ASSERT_EQ(inUse, d->budget().used());
  }
  EXPECT_EQ(fake.synchronizations, 0);
}

} // namespace

} // namespace device_experts_test
