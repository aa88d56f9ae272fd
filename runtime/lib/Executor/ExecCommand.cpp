//===- ExecCommand.cpp - moe-exec's command line and run loop -------------===//
//
//   moe-exec MODEL_DIR --input hidden.npy --out DIR [--policy P.mlir] [--entry NAME]
//            [--set knob=v ...] [--request-ids r.npy] [--positions p.npy]
//            [--phase prefill|decode|mixed] [--layers A:B] [--block-only]
//            [--replay DIR] [--device host] [--repeat N] [--capture DIR]
//   mpirun -np N moe-exec MODEL_DIR --input hidden.npy --ep N --out DIR [...]
//            (expert parallelism: each rank holds E/N experts and T/N tokens; rank 0
//            writes the same outputs as a single-rank run)
//   moe-exec MODEL_DIR --batches FILE.npz --out DIR [...]   (a sequence of batches)
//
// Writes DIR/hidden.npy (the stack h <- h + MoE_l(RMSNorm_l(h))) or, with --block-only,
// DIR/block_<l>.npy (each MoE block on the same input), DIR/topk_ids_<l>.npy,
// DIR/topk_weights_<l>.npy and DIR/metrics.json; prints one line per layer. With
// --capture TRACE_DIR also the routing as a routing trace (docs/traces.md).
//
//===----------------------------------------------------------------------===//
#include "switchyard/Executor/ExecCommand.h"
#include "switchyard/Executor/EpMoeLayer.h"
#include "switchyard/Executor/TraceCapture.h"
#include "switchyard/Runtime/Npy.h"
#include "switchyard/Runtime/Npz.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sys/stat.h>

namespace switchyard::exec {

const char *const kExecUsage =
    "usage: moe-exec MODEL_DIR (--input hidden.npy | --batches FILE.npz) --out DIR "
    "[options]\n"
    "  --policy P.mlir        routing policy (default: the model's native routing)\n"
    "  --entry NAME           the router in the policy file\n"
    "  --set knob=value       a run-time knob of the policy (repeatable)\n"
    "  --request-ids r.npy    int32 [T] request of each token\n"
    "  --positions p.npy      int32 [T] position of each token in its request\n"
    "  --phase P              prefill | decode | mixed (default: derived)\n"
    "  --layers A:B           checkpoint layers A <= l < B (default: all)\n"
    "  --block-only           each MoE block on the same input: DIR/block_<l>.npy\n"
    "  --replay DIR           replay the routing recorded in "
    "DIR/topk_{ids,weights}_<l>.npy\n"
    "  --batches FILE.npz     run a sequence of batches instead of --input: hidden_<i>\n"
    "                         [T_i, H], optional request_ids_<i>, positions_<i>, "
    "phase_<i>;\n"
    "                         results in DIR/batch_<i>/, a per-batch table\n"
    "  --device host          where to run (host)\n"
    "  --ep N                 expert parallelism over the N ranks of an MPI job\n"
    "                         (mpirun -np N moe-exec ... --ep N); rank 0 writes DIR\n"
    "  --eplb W               live EPLB with --ep: re-plan every W steps (batches) with\n"
    "                         the compiled policies/eplb.mlir and move expert weights\n"
    "  --eplb-slots S         physical slots (default E + E/8, a multiple of N)\n"
    "  --eplb-step-bytes B    expert weight bytes moved per layer and step (default 64 "
    "MiB)\n"
    "  --libra                Libra with --ep: each layer predicts the next one's routing\n"
    "                         (policies/libra.mlir @libra_predict), plans and copies its\n"
    "                         replicas (@libra) while it computes; two-stage execution\n"
    "                         with token sharding (@libra_shard) on a CPU thread\n"
    "  --libra-set K=V        a knob of policies/libra.mlir (extra_experts, alpha, "
    "epsilon)\n"
    "  --memory MODE          experts in a device budget (host emulation): resident,\n"
    "                         static-lo, dynaexq (policies/dynaexq.mlir), offload\n"
    "                         (policies/expertflow.mlir prefetch), on-demand\n"
    "  --budget BYTES         the device budget for expert weights (e.g. 512M, 2G)\n"
    "  --lo int4|int8         the low-precision version (default int4; --int4-group N)\n"
    "  --link-bandwidth B     host->device bytes/s of the emulated link (default 25e9,\n"
    "                         PCIe 4.0 x16; 0: unthrottled)\n"
    "  --update-steps N       dynaexq: the residency rule every N steps (default 1), or\n"
    "  --update-seconds S     every S seconds of wall time\n"
    "  --memory-set K=V       a knob of the mode's rule (alpha, margin; threshold, ...)\n"
    "  --memory-check         check the store's invariants at every step boundary\n"
    "  --inject-copy-failures P, --inject-copy-delay S   faults on the emulated link\n"

    "  --capture DIR          record the routing (router logits, the policy's ids and\n"
    "                         weights, per-token batch metadata) as a routing trace\n"
    "                         in DIR (docs/traces.md; one step per batch)\n"
    "  --capture-max-tokens N at most N tokens per layer (default 65536)\n"
    "  --repeat N             run N times, report the fastest (timing)\n";

int ExecCommand::fail(const std::string &message) const {
  if (ranks && ranks->size() > 1)
    std::fprintf(stderr, "moe-exec: error: rank %d: %s\n", ranks->rank(), message.c_str());
  else
    std::fprintf(stderr, "moe-exec: error: %s\n", message.c_str());
  return 1;
}

namespace {

bool readInt32s(const std::string &path, const std::string &flag, int64_t tokens,
                std::vector<int32_t> &out, std::string &error) {
  npy::Array a;
  std::string what = flag + " (" + path + ")";
  if (!npy::load(path, what, a, error) || !npy::toInt32(a, what, out, error))
    return false;
  if (a.shape.size() != 1 || a.shape[0] != tokens) {
    error = what + ": expected shape (" + std::to_string(tokens) + ",), got " +
            npy::formatShape(a.shape);
    return false;
  }
  return true;
}

/// A whole decimal integer in [lo, hi].
bool parseInteger(const std::string &text, int64_t lo, int64_t hi, int64_t &out) {
  char *end = nullptr;
  long long n = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end || n < lo || n > hi)
    return false;
  out = n;
  return true;
}

/// The slot `table` maps `name` to, or null.
template <typename Slot, size_t N>
Slot *lookup(const std::pair<const char *, Slot *> (&table)[N], const std::string &name) {
  for (const auto &[option, slot] : table)
    if (name == option)
      return slot;
  return nullptr;
}

bool parseRange(const std::string &text, int64_t &first, int64_t &last) {
  size_t colon = text.find(':');
  if (colon == std::string::npos)
    return false;
  char *end = nullptr;
  std::string a = text.substr(0, colon), b = text.substr(colon + 1);
  first = a.empty() ? 0 : std::strtoll(a.c_str(), &end, 10);
  if (!a.empty() && *end)
    return false;
  last = b.empty() ? -1 : std::strtoll(b.c_str(), &end, 10);
  return b.empty() || !*end;
}

/// "123", "64M", "1.5G", "512KiB": bytes (K, M, G powers of 1024; KB, MB, GB of 1000).
bool parseBytes(const std::string &text, int64_t &out) {
  char *end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || !(value >= 0))
    return false;
  std::string unit(end);
  double scale = unit.empty() || unit == "B"    ? 1
                 : unit == "K" || unit == "KiB" ? 1024.0
                 : unit == "M" || unit == "MiB" ? 1024.0 * 1024
                 : unit == "G" || unit == "GiB" ? 1024.0 * 1024 * 1024
                 : unit == "KB"                 ? 1e3
                 : unit == "MB"                 ? 1e6
                 : unit == "GB"                 ? 1e9
                                                : -1;
  if (scale < 0 || value * scale > 9e18)
    return false;
  out = static_cast<int64_t>(value * scale);
  return true;
}

/// A finite number >= 0 (or > 0 when `positive`).
bool parseNumber(const std::string &text, double &out, bool positive) {
  char *end = nullptr;
  out = std::strtod(text.c_str(), &end);
  return end != text.c_str() && !*end && std::isfinite(out) &&
         (positive ? out > 0 : out >= 0);
}

/// One batch to run: its hidden states, structure, and where its results go.
struct Job {
  std::string name; // "--batches (b.npz) batch 3: " in messages, "" for --input
  std::vector<float> hidden;
  int64_t tokens = 0;
  BatchInfo batch;
  bool phaseGiven = false;
  Phase phase = Phase::Decode;
  std::string out, replay;
};

bool checkHidden(const npy::Array &a, const std::string &what,
                 const model::MoeConfig &config, Job &job, std::string &error) {
  if (!npy::toFloat32(a, what, job.hidden, error))
    return false;
  if (a.shape.size() != 2 || a.shape[1] != config.hidden) {
    error = what + ": expected hidden states [T, " + std::to_string(config.hidden) +
            "] (hidden_size of " + config.path + "), got " + npy::formatShape(a.shape);
    return false;
  }
  job.tokens = a.shape[0];
  return true;
}

/// --batches FILE.npz: hidden_<i> [T_i, H] for i = 0, 1, ... and optionally
/// request_ids_<i>, positions_<i> (int [T_i]) and phase_<i> (0 prefill, 1 decode,
/// 2 mixed); results under OUT/batch_<i>/, replays from REPLAY/batch_<i>/.
bool readBatches(const std::string &path, const model::MoeConfig &config,
                 const std::string &out, const std::string &replay, std::vector<Job> &jobs,
                 std::string &error) {
  std::map<std::string, npy::Array> arrays;
  if (!npy::loadNpz(path, "--batches (" + path + ")", arrays, error))
    return false;
  size_t used = 0;
  for (int64_t i = 0; arrays.count("hidden_" + std::to_string(i)); ++i) {
    std::string n = std::to_string(i), what = "--batches (" + path + ")['";
    Job job;
    job.name = "--batches (" + path + ") batch " + n + ": "; // names the file too
    job.out = out + "/batch_" + n;
    job.replay = replay.empty() ? "" : replay + "/batch_" + n;
    if (!checkHidden(arrays["hidden_" + n], what + "hidden_" + n + "']", config, job,
                     error))
      return false;
    ++used;
    job.batch.tokens = job.tokens;
    for (auto [key, slot] : {std::pair{"request_ids_", &job.batch.requestIds},
                             std::pair{"positions_", &job.batch.positions}}) {
      auto it = arrays.find(key + n);
      if (it == arrays.end())
        continue;
      ++used;
      std::string at = what + key + n + "']";
      if (!npy::toInt32(it->second, at, *slot, error))
        return false;
      if (it->second.shape != std::vector<int64_t>{job.tokens}) {
        error = at + ": expected shape (" + std::to_string(job.tokens) + ",), got " +
                npy::formatShape(it->second.shape);
        return false;
      }
    }
    if (auto it = arrays.find("phase_" + n); it != arrays.end()) {
      ++used;
      std::vector<int32_t> phase;
      std::string at = what + "phase_" + n + "']";
      if (!npy::toInt32(it->second, at, phase, error))
        return false;
      if (phase.size() != 1 || phase[0] < 0 || phase[0] > 2) {
        error = at + ": expected one value, 0 (prefill), 1 (decode) or 2 (mixed)";
        return false;
      }
      job.phaseGiven = true;
      job.phase = static_cast<Phase>(phase[0]);
    }
    jobs.push_back(std::move(job));
  }
  if (jobs.empty() || used != arrays.size()) {
    std::string names;
    for (const auto &[name, a] : arrays)
      names += (names.empty() ? "" : ", ") + name;
    error =
        "--batches (" + path + "): " +
        (jobs.empty() ? std::string("no hidden_0")
                      : "members other than hidden_<i>, request_ids_<i>, positions_<i>, "
                        "phase_<i> for consecutive i") +
        " (it holds: " + names + ")";
    return false;
  }
  return true;
}

bool readReplay(const Executor &executor, const Job &job,
                std::map<int64_t, Routing> &replay, std::string &error) {
  for (const auto &layer : executor.layers()) {
    std::string l = std::to_string(layer->index());
    npy::Array ids, weights;
    Routing &r = replay[layer->index()];
    std::string idsPath = job.replay + "/topk_ids_" + l + ".npy";
    std::string weightsPath = job.replay + "/topk_weights_" + l + ".npy";
    if (!npy::load(idsPath, "--replay (" + idsPath + ")", ids, error) ||
        !npy::toInt32(ids, "--replay (" + idsPath + ")", r.ids, error) ||
        !npy::load(weightsPath, "--replay (" + weightsPath + ")", weights, error) ||
        !npy::toFloat32(weights, "--replay (" + weightsPath + ")", r.weights, error))
      return false;
    if (ids.shape.size() != 2 || ids.shape[0] != job.tokens || weights.shape != ids.shape) {
      error = "--replay: " + idsPath + " and " + weightsPath + " must both be [" +
              std::to_string(job.tokens) + ", k], got " + npy::formatShape(ids.shape) +
              " and " + npy::formatShape(weights.shape);
      return false;
    }
    r.tokens = job.tokens;
    r.k = ids.shape[1];
  }
  return true;
}

/// Runs `job` `repeat` times (keeping each layer's fastest metrics) and writes its
/// results: hidden.npy or block_<l>.npy, topk_ids_<l>.npy, topk_weights_<l>.npy,
/// metrics.json.
bool runJob(Executor &executor, Job &job, bool blockOnly, int64_t repeat,
            comm::Communicator *ranks, std::vector<LayerMetrics> &best,
            std::map<int64_t, Routing> &routings, std::string &error) {
  std::map<int64_t, Routing> replay;
  if (!job.replay.empty() && !readReplay(executor, job, replay, error))
    return false;
  const std::map<int64_t, Routing> *fixed = job.replay.empty() ? nullptr : &replay;
  std::map<int64_t, std::vector<float>> blocks;
  std::vector<LayerMetrics> metrics;
  std::vector<float> result;
  const int64_t h = executor.config().hidden, t = job.tokens;
  // With --ep this rank runs the stack on its slice of the tokens (the batch metadata
  // stays global); the slices are gathered on rank 0 afterwards.
  auto [first, end] = ranks ? tokenSlice(t, ranks->rank(), ranks->size())
                            : std::pair<int64_t, int64_t>{0, t};
  std::vector<float> slice(job.hidden.begin() + first * h, job.hidden.begin() + end * h);
  for (int64_t run = 0; run < repeat; ++run) {
    bool ok = blockOnly ? executor.runBlocks(job.hidden, job.tokens, job.batch, fixed,
                                             routings, blocks, metrics, error)
                        : executor.runStack(result = slice, end - first, job.batch, fixed,
                                            routings, metrics, error);
    if (!ok)
      return false;
    if (best.empty())
      best = metrics;
    for (size_t i = 0; i < metrics.size(); ++i)
      if (metrics[i].seconds.total() < best[i].seconds.total())
        best[i] = metrics[i];
  }
  if (ranks) {
    TokenSlices slices;
    std::vector<float> all;
    if (!gatherSlices(*ranks, end - first, slices, error) ||
        !gatherRows(*ranks, result.data(), end - first, h, slices, all, error))
      return false;
    result = std::move(all);
    if (ranks->rank() != 0) // rank 0 writes the results
      return true;
  }
  if (mkdir(job.out.c_str(), 0755) != 0 && errno != EEXIST) {
    error = "cannot create '" + job.out + "': " + std::strerror(errno);
    return false;
  }
  if (blockOnly) {
    for (const auto &[layer, y] : blocks)
      if (!npy::save(job.out + "/block_" + std::to_string(layer) + ".npy",
                     npy::makeF32({t, h}, y.data()), error))
        return false;
  } else if (!npy::save(job.out + "/hidden.npy", npy::makeF32({t, h}, result.data()),
                        error)) {
    return false;
  }
  for (const auto &[layer, r] : routings) {
    std::string l = std::to_string(layer);
    if (!npy::save(job.out + "/topk_ids_" + l + ".npy",
                   npy::makeI32({t, r.k}, r.ids.data()), error) ||
        !npy::save(job.out + "/topk_weights_" + l + ".npy",
                   npy::makeF32({t, r.k}, r.weights.data()), error))
      return false;
  }
  std::ofstream(job.out + "/metrics.json") << metricsToJson(best, executor.memoryMetrics());
  return true;
}

} // namespace

std::optional<int> ExecCommand::parse(int argc, char **argv) {
  // Options whose value is kept as given, and the repeatable knob=value settings.
  const std::pair<const char *, std::string *> plain[] = {
      {"--input", &input},
      {"--out", &out},
      {"--policy", &options.policyPath},
      {"--entry", &options.entry},
      {"--request-ids", &requestIdsPath},
      {"--positions", &positionsPath},
      {"--phase", &phaseText},
      {"--batches", &batchesPath},
      {"--replay", &replayDir},
      {"--device", &options.device}};
  const std::pair<const char *, std::vector<std::string> *> settings[] = {
      {"--set", &options.knobSettings},
      {"--libra-set", &options.libraSettings},
      {"--memory-set", &options.memory.knobSettings}};
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](std::string &slot) {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "moe-exec: error: %s needs a value\n%s", a.c_str(),
                     kExecUsage);
        return false;
      }
      slot = argv[++i];
      return true;
    };
    std::string v;
    if (std::string *slot = lookup(plain, a)) {
      if (!value(*slot))
        return 1;
    } else if (std::vector<std::string> *list = lookup(settings, a)) {
      if (!value(v))
        return 1;
      if (v.find('=') == std::string::npos)
        return fail(a + " '" + v + "' is not of the form knob=value");
      list->push_back(v);
    } else if (a == "-h" || a == "--help") {
      std::printf("%s", kExecUsage);
      return 0;
    } else if (a == "--layers") {
      if (!value(v))
        return 1;
      if (!parseRange(v, options.firstLayer, options.lastLayer))
        return fail("--layers '" + v +
                    "' is not A:B (checkpoint layer indices, A <= l < B)");
    } else if (a == "--block-only") {
      blockOnly = true;
    } else if (a == "--ep") {
      if (!value(v))
        return 1;
      if (!parseInteger(v, 1, 4096, ep))
        return fail("--ep '" + v + "' is not a rank count in [1, 4096]");
    } else if (a == "--eplb" || a == "--eplb-slots" || a == "--eplb-step-bytes") {
      if (!value(v))
        return 1;
      int64_t n = 0;
      if (!parseInteger(v, 1, int64_t(1) << 50, n))
        return fail(a + " '" + v + "' is not a positive integer");
      (a == "--eplb"         ? options.eplb.window
       : a == "--eplb-slots" ? options.eplb.slots
                             : options.eplb.bytesPerStep) = n;
    } else if (a == "--libra") {
      options.libra = true;
    } else if (a == "--memory") {
      if (!value(v))
        return 1;
      if (!memory::parseMemoryMode(v, options.memory.mode))
        return fail("--memory '" + v +
                    "' is not resident, static-lo, dynaexq, offload or on-demand");
      options.memoryOn = true;
    } else if (a == "--budget") {
      if (!value(v))
        return 1;
      if (!parseBytes(v, options.memory.budgetBytes) || options.memory.budgetBytes <= 0)
        return fail("--budget '" + v +
                    "' is not a positive byte count (e.g. 512M, 2G, 123456)");
    } else if (a == "--lo") {
      if (!value(v))
        return 1;
      if (!memory::parsePrecision(v, options.memory.low) ||
          options.memory.low == memory::Precision::High)
        return fail("--lo '" + v + "' is not int4 or int8");
    } else if (a == "--int4-group" || a == "--update-steps") {
      if (!value(v))
        return 1;
      int64_t n = 0;
      if (!parseInteger(v, 1, 1 << 20, n))
        return fail(a + " '" + v + "' is not a positive integer");
      (a == "--int4-group" ? options.memory.group : options.memory.updateSteps) = n;
    } else if (a == "--link-bandwidth" || a == "--update-seconds" ||
               a == "--inject-copy-failures" || a == "--inject-copy-delay") {
      if (!value(v))
        return 1;
      double x = 0;
      if (!parseNumber(v, x, a == "--update-seconds") ||
          (a == "--inject-copy-failures" && x >= 1))
        return fail(a + " '" + v + "' is not " +
                    (a == "--inject-copy-failures" ? "a probability in [0, 1)"
                                                   : "a finite number >= 0"));
      (a == "--link-bandwidth"         ? options.memory.link.bytesPerSecond
       : a == "--update-seconds"       ? options.memory.updateSeconds
       : a == "--inject-copy-failures" ? options.memory.link.failureRate
                                       : options.memory.link.maxDelaySeconds) = x;
    } else if (a == "--memory-check") {
      options.memory.checkInvariants = true;
    } else if (a == "--capture") {
      if (!value(captureDir))
        return 1;
      if (captureDir.empty())
        return fail("--capture needs a directory");
    } else if (a == "--capture-max-tokens") {
      if (!value(v))
        return 1;
      if (!parseInteger(v, 1, int64_t(1) << 40, captureMaxTokens))
        return fail("--capture-max-tokens '" + v + "' is not a positive integer");
      captureMaxGiven = true;
    } else if (a == "--repeat") {
      if (!value(v))
        return 1;
      if (!parseInteger(v, 1, 100000, repeat))
        return fail("--repeat '" + v + "' is not an integer in [1, 100000]");
    } else if (!a.empty() && a[0] == '-') {
      return fail("unknown option '" + a + "'\n" + kExecUsage);
    } else if (options.modelDir.empty()) {
      options.modelDir = a;
    } else {
      return fail("unexpected argument '" + a + "' (one MODEL_DIR)\n" + kExecUsage);
    }
  }
  if (options.modelDir.empty() || input.empty() == batchesPath.empty() || out.empty())
    return fail(
        std::string("MODEL_DIR, --out and one of --input / --batches are required\n") +
        kExecUsage);
  while (out.size() > 1 && out.back() == '/') // the paths printed join it with "/"
    out.pop_back();
  if (!batchesPath.empty() && (!requestIdsPath.empty() || !positionsPath.empty()))
    return fail("--batches carries request_ids_<i> / positions_<i> itself; drop "
                "--request-ids / --positions");
  if (options.memoryOn != (options.memory.budgetBytes > 0))
    return fail(options.memoryOn
                    ? "--memory needs --budget BYTES (the device memory for experts)"
                    : "--budget sets the device memory of --memory MODE: give both");
  if (captureMaxGiven && captureDir.empty())
    return fail("--capture-max-tokens bounds --capture DIR: give both");
  if (!captureDir.empty() && !replayDir.empty())
    return fail("--capture records the policy's routing; a --replay run has none (drop "
                "one of them)");
  if (!captureDir.empty() && options.device != "host")
    return fail("--capture records the host layers' routing: use --device host");
  return std::nullopt;
}

int ExecCommand::run() {
  Phase givenPhase;
  if (!phaseText.empty() && !parsePhase(phaseText, givenPhase))
    return fail("--phase '" + phaseText + "' is not prefill, decode or mixed");

  std::string error;
  std::unique_ptr<comm::Communicator> world;
  if (ep > 0) {
    if (blockOnly)
      return fail("--ep runs the stack (--block-only is single-rank in this version)");
    world = comm::createMpiCommunicator({}, error);
    if (!world)
      return fail(error);
    ranks = world.get();
    if (!comm::checkWorldSize(*world, int(ep), error))
      return fail(error);
    options.comm = world.get();
    if (!leader()) // rank 0 prints the tables; every rank reports its errors on stderr
      std::freopen("/dev/null", "w", stdout);
  }
  runtime::PolicyCache cache;
  std::unique_ptr<Executor> executor = Executor::create(options, cache, error);
  // Every rank learns whether every rank loaded the model and the policy.
  if (ranks && !comm::agreeAllStarted(*ranks, bool(executor), error, error))
    return fail(error);
  if (!executor)
    return fail(error);
  const model::MoeConfig &config = executor->config();
  std::vector<std::string> inputs = executor->policySignature().inputNames();
  if (!config.sigmoidScoring && std::count(inputs.begin(), inputs.end(), "bias"))
    std::printf("moe-exec: note: @%s takes a correction bias; %s has none, so it is zero\n",
                executor->policySignature().entry.c_str(), config.path.c_str());

  std::vector<Job> jobs;
  std::string what = "--input (" + input + ")";
  if (!batchesPath.empty()) {
    if (!readBatches(batchesPath, config, out, replayDir, jobs, error))
      return fail(error);
  } else {
    Job job;
    job.out = out;
    job.replay = replayDir;
    npy::Array hidden;
    if (!npy::load(input, what, hidden, error) ||
        !checkHidden(hidden, what, config, job, error))
      return fail(error);
    job.batch.tokens = job.tokens;
    if ((!requestIdsPath.empty() && !readInt32s(requestIdsPath, "--request-ids", job.tokens,
                                                job.batch.requestIds, error)) ||
        (!positionsPath.empty() &&
         !readInt32s(positionsPath, "--positions", job.tokens, job.batch.positions, error)))
      return fail(error);
    jobs.push_back(std::move(job));
  }
  for (Job &job : jobs)
    if (!job.batch.derive(job.phaseGiven      ? &job.phase
                          : phaseText.empty() ? nullptr
                                              : &givenPhase,
                          error))
      return fail(job.name + error);
  if (mkdir(out.c_str(), 0755) != 0 && errno != EEXIST)
    return fail("cannot create '" + out + "': " + std::strerror(errno));
  // --capture: rank 0 keeps the logits it routes (off: the router copies nothing).
  std::unique_ptr<TraceCapture> capture;
  if (!captureDir.empty()) {
    capture = std::make_unique<TraceCapture>(captureDir, captureMaxTokens);
    if (!capture->open(error))
      return fail(error);
    executor->recordLogits(leader());
  }

  std::printf("moe-exec: %s (%s), %zu MoE layers, policy %s @%s%s\n",
              options.modelDir.c_str(), config.architecture.c_str(),
              executor->layers().size(), executor->policyPath().c_str(),
              executor->policySignature().entry.c_str(),
              replayDir.empty() ? "" : ", replayed");
  if (!batchesPath.empty())
    std::printf("%6s %7s %8s %9s %7s %9s %10s %10s\n", "batch", "tokens", "phase",
                "requests", "verify", "experts", "MB read", "ms");
  for (size_t i = 0; i < jobs.size(); ++i) {
    Job &job = jobs[i];
    std::vector<LayerMetrics> best;
    std::map<int64_t, Routing> routings;
    if (!runJob(*executor, job, blockOnly, repeat, ranks, best, routings, error))
      return fail(job.name + error);
    std::string warning;
    if (capture && leader() &&
        !capture->record(routings, job.batch, config.experts, warning) && !warning.empty())
      std::fprintf(stderr, "moe-exec: warning: %s\n", warning.c_str());
    if (!batchesPath.empty()) {
      int64_t experts = 0, bytes = 0;
      double seconds = 0;
      for (const LayerMetrics &m : best) {
        experts += m.activeExperts;
        bytes += m.expertBytes;
        seconds += m.seconds.total();
      }
      std::printf("%6zu %7lld %8s %9lld %7lld %9lld %10.1f %10.3f\n", i,
                  static_cast<long long>(job.tokens), phaseName(job.batch.phase),
                  static_cast<long long>(job.batch.requests),
                  static_cast<long long>(job.batch.verifyRequests),
                  static_cast<long long>(experts), bytes / 1e6, 1e3 * seconds);
      continue;
    }
    std::printf("%lld tokens (%s, %lld requests)\n", static_cast<long long>(job.tokens),
                phaseName(job.batch.phase), static_cast<long long>(job.batch.requests));
    std::printf("%6s %7s %9s %12s %10s %9s %9s %9s %9s %9s\n", "layer", "tokens", "experts",
                "bytes", "total_ms", "router", "policy", "permute", "ffn", "combine");
    for (const LayerMetrics &m : best) {
      std::printf("%6lld %7lld %9lld %12lld %10.3f %9.3f %9.3f %9.3f %9.3f %9.3f\n",
                  static_cast<long long>(m.layer), static_cast<long long>(m.tokens),
                  static_cast<long long>(m.activeExperts),
                  static_cast<long long>(m.expertBytes), 1e3 * m.seconds.total(),
                  1e3 * m.seconds.routerGemm, 1e3 * m.seconds.policy,
                  1e3 * m.seconds.permute, 1e3 * m.seconds.ffn, 1e3 * m.seconds.combine);
      if (!m.slotsPerRank.empty()) { // expert parallelism: what every rank served
        std::string slots;
        for (int64_t s : m.slotsPerRank)
          slots += (slots.empty() ? "" : " ") + std::to_string(s);
        std::printf("%6s slots per rank [%s], imbalance %.3f, comm %.3f ms (rank 0)\n",
                    "ep", slots.c_str(), m.imbalance(), 1e3 * m.commSeconds);
      }
    }
  }
  std::printf("moe-exec: wrote %s/%s{%s,topk_ids_<l>,topk_weights_<l>}.npy, metrics.json\n",
              out.c_str(), batchesPath.empty() ? "" : "batch_<i>/",
              blockOnly ? "block_<l>" : "hidden");
  if (capture && leader()) {
    TraceMeta meta;
    meta.model = options.modelDir;
    meta.experts = config.experts;
    meta.topK = config.topK;
    meta.groups = config.groups;
    meta.hiddenSize = config.hidden;
    meta.moeIntermediateSize = config.expertIntermediate;
    meta.torchDtype = config.torchDtype;
    for (const auto &layer : executor->layers())
      meta.layers.push_back(layer->index());
    if (!capture->write(meta, error))
      return fail(error);
    std::printf("moe-exec: captured %s: %lld tokens, %lld steps, %zu layers\n",
                captureDir.c_str(), static_cast<long long>(capture->tokens()),
                static_cast<long long>(capture->steps()), meta.layers.size());
  }
  return 0;
}

} // namespace switchyard::exec
