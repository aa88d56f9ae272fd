//===- Module.cpp - the _switchyard extension module -----------------------===//
#include "Bindings.h"

namespace switchyard::python {

static nb::object errorType;
/// The exception class of each status code (set_error_classes); none: SwitchyardError.
/// Never freed: it must outlive the interpreter's teardown of this module.
static nb::dict *errorClasses = nullptr;

void fail(runtime::StatusCode code, const std::string &message) {
  nb::object type = errorType;
  nb::int_ key(static_cast<int>(code));
  if (errorClasses && errorClasses->contains(key))
    type = (*errorClasses)[key];
  PyErr_SetString(type.ptr(), message.c_str());
  throw nb::python_error();
}

/// The runtime's element type for a DLPack dtype.
static bool dtypeOf(nb::dlpack::dtype t, npy::DType &out) {
  using Code = nb::dlpack::dtype_code;
  if (t.lanes != 1)
    return false;
  switch (static_cast<Code>(t.code)) {
  case Code::Float:
    if (t.bits == 32)
      out = npy::DType::F32;
    else if (t.bits == 16)
      out = npy::DType::F16;
    else if (t.bits == 64)
      out = npy::DType::F64;
    else
      return false;
    return true;
  case Code::Bfloat:
    out = npy::DType::BF16;
    return t.bits == 16;
  case Code::Int:
    if (t.bits == 32)
      out = npy::DType::I32;
    else if (t.bits == 64)
      out = npy::DType::I64;
    else if (t.bits == 8)
      out = npy::DType::I8;
    else
      return false;
    return true;
  case Code::UInt:
    out = npy::DType::U8;
    return t.bits == 8;
  case Code::Bool:
    out = npy::DType::Bool;
    return t.bits == 8;
  default:
    return false;
  }
}

runtime::TensorView viewOf(const nb::ndarray<> &array, const std::string &what) {
  runtime::TensorView view;
  if (!dtypeOf(array.dtype(), view.dtype))
    fail(what + ": unsupported element type (code " + std::to_string(array.dtype().code) +
         ", " + std::to_string(array.dtype().bits) + " bits)");
  int device = array.device_type();
  if (device == nb::device::cuda::value)
    view.onDevice = true;
  else if (device != nb::device::cpu::value)
    fail(what + ": memory on device type " + std::to_string(device) +
         " (only CPU and CUDA memory are supported)");
  int64_t expectStride = 1;
  view.shape.resize(array.ndim());
  for (size_t d = 0; d < array.ndim(); ++d)
    view.shape[d] = static_cast<int64_t>(array.shape(d));
  for (size_t d = array.ndim(); d-- > 0;) {
    if (view.shape[d] != 1 && array.stride(d) != expectStride)
      fail(what + ": not C-contiguous (call .contiguous() / np.ascontiguousarray first)");
    expectStride *= view.shape[d];
  }
  view.data = array.data();
  return view;
}

} // namespace switchyard::python

NB_MODULE(_switchyard, m) {
  using namespace switchyard::python;
  m.doc() = "Switchyard's runtime: compiled routing policies and the MoE executor";
  errorType = nb::borrow(PyErr_NewExceptionWithDoc(
      "switchyard._switchyard.SwitchyardError",
      "A compiler diagnostic or a bad input, worded as the command-line tools word it.",
      PyExc_RuntimeError, nullptr));
  m.attr("SwitchyardError") = errorType;
  // The runtime's status codes, and the classes the package raises for them.
  nb::dict codes;
  using switchyard::runtime::StatusCode;
  for (StatusCode code :
       {StatusCode::kInvalidArgument, StatusCode::kInvalidKnob, StatusCode::kBadFile,
        StatusCode::kCompileFailed, StatusCode::kDevice, StatusCode::kInternal})
    codes[switchyard::runtime::statusCodeName(code)] = static_cast<int>(code);
  m.attr("STATUS_CODES") = codes;
  errorClasses = new nb::dict();
  m.def(
      "set_error_classes",
      [](nb::dict classes) {
        for (auto [code, type] : classes)
          if (!PyType_Check(type.ptr()) ||
              !PyObject_IsSubclass(type.ptr(), errorType.ptr()))
            fail("set_error_classes: every class must derive from SwitchyardError");
        *errorClasses = classes;
      },
      nb::arg("classes"),
      "Registers the exception class raised for each status code (an int key).");
  bindSignature(m);
  bindPolicies(m);
  bindSteps(m);
  bindExecutor(m);
  bindShapeTable(m);
}
