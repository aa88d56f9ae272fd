//===- Status.h - what a runtime call reports: a code and a message -----*- C++ -*-===//
//
// A runtime::Status carries one StatusCode and a message naming the file, argument or
// knob at fault (as IREE's iree_status_t). The code says what kind of failure it is,
// so that callers branch on it and the Python package raises one exception class per
// code without reading the message. The generated C entries return an int status;
// entryStatus() turns it into a Status.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_RUNTIME_STATUS_H
#define SWITCHYARD_RUNTIME_STATUS_H

#include <cstdint>
#include <string>
#include <utility>

namespace switchyard::runtime {

struct Signature;

/// The kinds of failure. The numbers are stable (the Python package maps them).
enum class StatusCode : int {
  kOk = 0,
  /// An argument of the call: its name, shape, dtype, device or values.
  kInvalidArgument = 1,
  /// A knob is unknown or breaks one of its rules.
  kInvalidKnob = 2,
  /// A file read on the call's behalf (config.json, checkpoint, .npy, manifest, cached
  /// library) is missing, too large or malformed.
  kBadFile = 3,
  /// The policy did not compile; the message holds the compiler's diagnostics.
  kCompileFailed = 4,
  /// A device, driver or library the call needs is absent or failed.
  kDevice = 5,
  /// Anything else: a bug, or a system call that failed.
  kInternal = 6,
};

/// The code's name as written in docs and Python ("invalid_argument", ...).
const char *statusCodeName(StatusCode code);

class [[nodiscard]] Status {
public:
  Status() = default;
  Status(StatusCode code, std::string message)
      : code_(code), message_(std::move(message)) {}
  static Status ok() { return {}; }

  bool isOk() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string &message() const { return message_; }

  /// For callers that still report `bool` plus a message: copies the message into
  /// `error` on failure and returns isOk().
  bool report(std::string &error) const {
    if (!isOk())
      error = message_;
    return isOk();
  }

private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

/// The Status of a generated entry's int result: 0 ok, 1 the token count outside
/// [0, kMaxTokens] (kInvalidArgument), 2 + j knob j broke a rule, or a rule relating
/// several knobs failed (kInvalidKnob). `what` prefixes the message ("@entry").
Status entryStatus(const Signature &signature, int32_t status, const std::string &what);

} // namespace switchyard::runtime

#endif
