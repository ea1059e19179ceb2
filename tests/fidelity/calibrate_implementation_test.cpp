// epsim calibrate fits one EP library's ep_backend keys: a set whose ep_comm points name two
// implementations is refused (exit 2, one line naming both) unless --implementation picks one, and
// an implementation with no points is refused too.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include "tests/cli/run_cli.hpp"
#include "tests/test_paths.hpp"

namespace epsim {

TEST_CASE("epsim calibrate: ep_comm points of two implementations need --implementation") {
  const std::filesystem::path dir = test::scratch_dir("calibrate_implementation");
  const std::filesystem::path src = test::source_dir();
  const std::string files = (src / "models/measurements/hybrid-ep-h100-sxm.yaml").string() + " " +
                            (src / "models/measurements/pplx-kernels-h100-sxm.yaml").string() + " --base " +
                            (src / "models/h100-sxm-8.yaml").string() + " --force -q -o ";
  const test::CliResult mixed = test::run_epsim("calibrate " + files + "mixed.yaml", dir);
  CHECK(mixed.status == 2);
  CHECK(mixed.err.find("mix implementations (hybrid_ep, pplx)") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir / "mixed.yaml"));

  const test::CliResult picked = test::run_epsim("calibrate " + files + "pplx.yaml --implementation pplx", dir);
  CHECK(picked.status == 0);
  CHECK(std::filesystem::exists(dir / "pplx.yaml"));
  // Fitted to pplx's 4 NVLink points alone, none of hybrid_ep's 54 RDMA points (printed without -q).
  const std::string loud = files.substr(0, files.find(" --force -q -o ")) + " --force -o ";
  const test::CliResult told = test::run_epsim("calibrate " + loud + "told.yaml --implementation pplx", dir);
  CHECK(told.status == 0);
  CHECK(told.out.find("ep_comm NVLink (one node), 4 pts") != std::string::npos);
  CHECK(told.out.find("RDMA") == std::string::npos);

  const test::CliResult unknown = test::run_epsim("calibrate " + files + "none.yaml --implementation nccl_ep", dir);
  CHECK(unknown.status == 2);
  CHECK(unknown.err.find("no ep_comm point of implementation 'nccl_ep'") != std::string::npos);
}

}  // namespace epsim
