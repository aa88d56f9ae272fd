//===- Status.cpp - status codes and the generated entries' statuses ------===//
#include "switchyard/Runtime/Status.h"
#include "switchyard/Runtime/Signature.h"

namespace switchyard::runtime {

const char *statusCodeName(StatusCode code) {
  switch (code) {
  case StatusCode::kOk:
    return "ok";
  case StatusCode::kInvalidArgument:
    return "invalid_argument";
  case StatusCode::kInvalidKnob:
    return "invalid_knob";
  case StatusCode::kBadFile:
    return "bad_file";
  case StatusCode::kCompileFailed:
    return "compile_failed";
  case StatusCode::kDevice:
    return "device";
  case StatusCode::kInternal:
    return "internal";
  }
  return "internal";
}

Status entryStatus(const Signature &signature, int32_t status, const std::string &what) {
  if (status == 0)
    return Status::ok();
  StatusCode code = status == 1 ? StatusCode::kInvalidArgument : StatusCode::kInvalidKnob;
  return {code, what + " returned status " + std::to_string(status) + ": " +
                    statusMessage(signature, status)};
}

} // namespace switchyard::runtime
