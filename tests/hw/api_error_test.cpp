// The one-line message epsim-hw prints when a CUDA, cuBLAS or NCCL call fails.
#include <doctest/doctest.h>

#include <string>

#include "hw/host/api_error.hpp"

using namespace epsim::hw;

TEST_CASE("a failed call names the file:line, the library, the call's text and the error") {
  ApiFailure f;
  f.api = "CUDA";
  f.call = "cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, s)";
  f.error_name = "cudaErrorInvalidValue";
  f.error_text = "invalid argument";
  f.file = "/home/u/epsim/hw/cuda/run_plans.cu";
  f.line = 52;
  const ApiError e(f);
  CHECK(std::string(e.what()) ==
        "hw/cuda/run_plans.cu:52: CUDA call cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, s) failed: "
        "cudaErrorInvalidValue (invalid argument)");
  CHECK(e.failure().line == 52);
}

TEST_CASE("an asynchronous error says it was only reported at this call, library detail stays on one line") {
  ApiFailure f;
  f.api = "CUDA";
  f.call = "cudaStreamSynchronize(s)";
  f.error_name = "cudaErrorIllegalAddress";
  f.error_text = "an illegal memory access was encountered";
  f.file = "hw/cuda/common.cu";
  f.line = 7;
  f.asynchronous = true;
  const std::string m = api_failure_message(f);
  CHECK(m.rfind("hw/cuda/common.cu:7: CUDA call cudaStreamSynchronize(s) failed: cudaErrorIllegalAddress (an illegal "
                "memory access was encountered); this error comes from device work enqueued earlier",
                0) == 0);
  CHECK(m.find("CUDA_LAUNCH_BLOCKING=1") != std::string::npos);

  ApiFailure n;
  n.api = "NCCL";
  n.call = "ncclGroupEnd()";
  n.error_name = "ncclSystemError";
  n.error_text = "unhandled system error (run with NCCL_DEBUG=INFO for details)";
  n.detail = "socket connect to 10.0.0.2 failed\nretrying\n";
  n.file = "x/hw/cuda/bench_alltoall.cu";
  n.line = 90;
  const std::string nm = api_failure_message(n);
  CHECK(nm ==
        "hw/cuda/bench_alltoall.cu:90: NCCL call ncclGroupEnd() failed: ncclSystemError (unhandled system error (run "
        "with NCCL_DEBUG=INFO for details)); socket connect to 10.0.0.2 failed retrying");
  CHECK(nm.find('\n') == std::string::npos);
}

TEST_CASE("source paths are shown from hw/ on") {
  CHECK(repository_relative("/a/hw/b/hw/cuda/x.cu") == "hw/cuda/x.cu");
  CHECK(repository_relative("hw/cuda/x.cu") == "hw/cuda/x.cu");
  CHECK(repository_relative("x.cu") == "x.cu");
  ApiFailure same;  // an error text equal to the name is not repeated
  same.api = "cuBLAS";
  same.call = "cublasCreate(&handle_)";
  same.error_name = "CUBLAS_STATUS_NOT_INITIALIZED";
  same.error_text = "CUBLAS_STATUS_NOT_INITIALIZED";
  same.file = "hw/cuda/grouped_gemm.cu";
  same.line = 3;
  CHECK(api_failure_message(same) ==
        "hw/cuda/grouped_gemm.cu:3: cuBLAS call cublasCreate(&handle_) failed: CUBLAS_STATUS_NOT_INITIALIZED");
}
