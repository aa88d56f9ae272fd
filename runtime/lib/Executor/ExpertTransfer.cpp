//===- ExpertTransfer.cpp - expert weights moving between ranks -----------===//
#include "switchyard/Executor/ExpertTransfer.h"

#include <cstdio>

namespace switchyard::exec {

ExpertMover::ExpertMover(comm::Communicator &comm) : main(comm) {}

bool ExpertMover::start(std::string &error) {
  if (started)
    return true;
  started = true;
  std::string why;
  channel = main.duplicate(why);
  if (channel) {
    worker = std::thread([this] { loop(); });
    return true;
  }
  // A library that cannot run a second channel on a thread: the caller's thread then.
  // Anything else (a rank gone) is an error.
  if (why.find("MPI_THREAD_MULTIPLE") == std::string::npos) {
    error = why;
    return false;
  }
  whyNotBackground = why;
  if (main.rank() == 0)
    std::fprintf(stderr,
                 "note: expert weights move on the calling thread between steps: %s\n",
                 why.c_str());
  return true;
}

ExpertMover::~ExpertMover() {
  if (!worker.joinable())
    return;
  {
    std::lock_guard<std::mutex> lock(mutex);
    stopping = true;
  }
  changed.notify_all();
  worker.join();
}

ExpertMover::Ticket ExpertMover::submit(TransferBatch batch) {
  std::string error;
  if (!start(error)) { // no channel: the batch fails with why when waited for
    std::lock_guard<std::mutex> lock(mutex);
    Ticket ticket = nextTicket++;
    done[ticket].error = error;
    return ticket;
  }
  std::unique_lock<std::mutex> lock(mutex);
  Ticket ticket = nextTicket++;
  if (!channel) { // no second channel: now, on the caller's thread
    lock.unlock();
    Result result = run(batch);
    lock.lock();
    done.emplace(ticket, std::move(result));
    return ticket;
  }
  queue.emplace_back(ticket, std::move(batch));
  changed.notify_all();
  return ticket;
}

bool ExpertMover::wait(Ticket ticket, std::map<int32_t, ExpertCopy> &received,
                       int64_t &moved, std::string &error) {
  std::unique_lock<std::mutex> lock(mutex);
  changed.wait(lock, [&] { return done.count(ticket) != 0; });
  Result result = std::move(done.at(ticket));
  done.erase(ticket);
  if (!result.ok) {
    error = "moving expert weights: " + result.error;
    return false;
  }
  received = std::move(result.received);
  moved = result.moved;
  return true;
}

void ExpertMover::loop() {
  std::unique_lock<std::mutex> lock(mutex);
  for (;;) {
    changed.wait(lock, [&] { return stopping || !queue.empty(); });
    if (queue.empty())
      return; // stopping, nothing left
    auto [ticket, batch] = std::move(queue.front());
    queue.pop_front();
    lock.unlock();
    Result result = run(batch);
    lock.lock();
    done.emplace(ticket, std::move(result));
    changed.notify_all();
  }
}

ExpertMover::Result ExpertMover::run(const TransferBatch &batch) {
  comm::Communicator &comm = channel ? *channel : main;
  const int n = comm.size(), me = comm.rank();
  Result result;
  // Packed per destination rank in the batch's order; unpacked per source in that order.
  std::vector<std::vector<uint8_t>> toPeer(static_cast<size_t>(n));
  std::vector<int64_t> sendBytes(static_cast<size_t>(n), 0),
      recvBytes(static_cast<size_t>(n), 0);
  for (const ExpertTransfer &t : batch.transfers) {
    result.moved += t.bytes;
    const FfnWeights &w = batch.weights.at(t.expert);
    if (t.from == me) {
      std::vector<uint8_t> &out = toPeer[static_cast<size_t>(t.to)];
      for (const model::TensorView *v : {w.gate, w.up, w.down})
        out.insert(out.end(), v->data, v->data + v->bytes);
      sendBytes[static_cast<size_t>(t.to)] += t.bytes;
    }
    if (t.to == me)
      recvBytes[static_cast<size_t>(t.from)] += t.bytes;
  }
  std::vector<uint8_t> send, recv;
  for (const std::vector<uint8_t> &block : toPeer)
    send.insert(send.end(), block.begin(), block.end());
  std::vector<int64_t> at(static_cast<size_t>(n), 0);
  for (int p = 1; p < n; ++p)
    at[static_cast<size_t>(p)] =
        at[static_cast<size_t>(p - 1)] + recvBytes[static_cast<size_t>(p - 1)];
  recv.resize(static_cast<size_t>(at[static_cast<size_t>(n - 1)] + recvBytes.back()));
  if (!comm.allToAllV(send.data(), sendBytes, recv.data(), recvBytes, result.error))
    return result;
  for (const ExpertTransfer &t : batch.transfers) {
    if (t.to != me)
      continue;
    const FfnWeights &w = batch.weights.at(t.expert); // the shapes and dtypes
    ExpertCopy &copy = result.received[t.expert];
    const uint8_t *from = recv.data() + at[static_cast<size_t>(t.from)];
    copy.bytes.assign(from, from + t.bytes);
    at[static_cast<size_t>(t.from)] += t.bytes;
    size_t offset = 0;
    const model::TensorView *views[3] = {w.gate, w.up, w.down};
    for (int j = 0; j < 3; ++j) {
      copy.views[j] = *views[j];
      copy.views[j].data = copy.bytes.data() + offset;
      offset += views[j]->bytes;
    }
  }
  result.ok = true;
  return result;
}

} // namespace switchyard::exec
