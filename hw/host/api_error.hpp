// The error epsim-hw raises when a CUDA runtime, cuBLAS or NCCL call fails. Its message is one line that
// names the library, the call as written in the source, the library's error name and text, and the
// source file:line, so that a failure on a GPU machine can be traced without a debugger. The message is
// built here, without CUDA headers, so its format is unit-tested on any machine; the CUDA side
// (hw/cuda/common.cuh: CUDA_CHECK, CUBLAS_CHECK, NCCL_CHECK, CUDA_CHECK_LAUNCH) only fills it in.
#pragma once

#include <stdexcept>
#include <string>

namespace epsim::hw {

struct ApiFailure {
  std::string api;         ///< "CUDA", "cuBLAS" or "NCCL"
  std::string call;        ///< the call's source text, e.g. "cudaMemcpyAsync(dst, src, n, kind, s)"
  std::string error_name;  ///< e.g. "cudaErrorIllegalAddress", "CUBLAS_STATUS_NOT_SUPPORTED", "ncclSystemError"
  std::string error_text;  ///< the library's description of the error
  std::string file;        ///< __FILE__ (shortened to the repository-relative path in the message)
  int line = 0;
  /// The error comes from device work enqueued before this call (a kernel or copy that faulted) and is
  /// only reported here: the message says so and how to find the real culprit.
  bool asynchronous = false;
  std::string detail;  ///< extra text from the library (NCCL's ncclGetLastError), may be empty
};

/// "hw/cuda/run_plans.cu:52: CUDA call cudaMemcpyAsync(...) failed: cudaErrorInvalidValue (invalid
/// argument)" plus the asynchronous note and the detail when present.
std::string api_failure_message(const ApiFailure& f);

/// `path` from its last "hw/" component on ("/src/epsim/hw/cuda/x.cu" -> "hw/cuda/x.cu"); unchanged
/// when there is none.
std::string repository_relative(const std::string& path);

class ApiError : public std::runtime_error {
 public:
  explicit ApiError(ApiFailure f) : std::runtime_error(api_failure_message(f)), failure_(std::move(f)) {}
  const ApiFailure& failure() const { return failure_; }

 private:
  ApiFailure failure_;
};

}  // namespace epsim::hw
