// `epsim fidelity`'s command line as a user types it: the default set is every *.yaml of its folder
// in name order, an empty folder is named, an existing output is refused before any work, and the
// DeepSeek-V3 section runs on the preset asked for. The measurements are the published NVLink copy
// figures of one H100 (models/measurements/copy-p2p-h100-sxm.yaml, 2 points).
#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include "tests/cli/run_cli.hpp"
#include "tests/test_paths.hpp"

namespace fs = std::filesystem;
using namespace epsim::test;

namespace {

/// A folder with models/ (the H100 and H800 presets) and measurements/ holding the copy figures
/// under each of `names`.
fs::path with_set(const std::string& folder, std::initializer_list<const char*> names) {
  const fs::path dir = scratch_dir(folder);
  const fs::path models = source_dir() / "models";
  fs::create_directories(dir / "models");
  fs::create_directories(dir / "measurements");
  for (const char* preset : {"h100-sxm-8.yaml", "h800.yaml"}) fs::copy_file(models / preset, dir / "models" / preset);
  for (const char* name : names)
    fs::copy_file(models / "measurements" / "copy-p2p-h100-sxm.yaml", dir / "measurements" / name);
  return dir;
}

const std::string kArgs = "fidelity --measurements-dir measurements --models models --hardware h100-sxm-8 ";

}  // namespace

TEST_CASE("epsim fidelity: the default set is every *.yaml of its folder, in name order") {
  const fs::path dir = with_set("fidelity_options_default", {"zeta.yaml", "alpha.yaml", "mu.yaml", "beta.yaml",
                                                             "omega.yaml", "gamma.yaml"});
  write_file(dir / "measurements" / "README.md", "# notes: not a measurement file\n");
  const CliResult r = run_epsim(kArgs + "--no-deepseek -o out.md", dir);
  REQUIRE_MESSAGE(r.status == 0, r.err);
  CHECK(says(r.err, "epsim fidelity: 12 points from 6 files, wrote out.md in"));
  CHECK(says(read_file(dir / "out.md"),
             "Measurement files (6):\n\n"
             "- `measurements/alpha.yaml`\n- `measurements/beta.yaml`\n- `measurements/gamma.yaml`\n"
             "- `measurements/mu.yaml`\n- `measurements/omega.yaml`\n- `measurements/zeta.yaml`\n"));
}

TEST_CASE("epsim fidelity: a folder without *.yaml is named, and nothing is written") {
  const fs::path dir = with_set("fidelity_options_empty", {});
  write_file(dir / "measurements" / "README.md", "# notes\n");
  const CliResult r = run_epsim(kArgs + "--no-deepseek -o out.md", dir);
  CHECK(r.status == 2);
  CHECK(r.err == "epsim: error: measurements: no *.yaml measurement files in this folder\n");
  CHECK_FALSE(fs::exists(dir / "out.md"));
}

TEST_CASE("epsim fidelity: an existing output is refused before the measurements are read") {
  const fs::path dir = with_set("fidelity_options_existing", {"set.yaml"});
  write_file(dir / "out.md", "the user's notes\n");
  write_file(dir / "measurements" / "broken.yaml", "kind: measurements\nheader: [\n");
  const CliResult r = run_epsim(kArgs + "--no-deepseek -o out.md", dir);
  CHECK(r.status == 2);
  CHECK(r.err == "epsim: error: out.md: the output file already exists; pass --force to regenerate it or choose "
                 "another output\n");
  CHECK(read_file(dir / "out.md") == "the user's notes\n");
}

TEST_CASE("epsim fidelity: the DeepSeek-V3 section runs on --deepseek-hardware, not on --hardware") {
  const fs::path dir = with_set("fidelity_options_deepseek", {"set.yaml"});
  const std::string model = (source_dir() / "models" / "deepseek-v3.yaml").string();
  const CliResult r = run_epsim(kArgs + "--deepseek-model '" + model + "' --deepseek-hardware h800 -o out.md", dir);
  REQUIRE_MESSAGE(r.status == 0, r.err);
  const std::string text = read_file(dir / "out.md");
  CHECK(says(text, "## DeepSeek-V3 layer on h800\n"));
  CHECK(says(text, "on `models/h800.yaml`, static EP"));
}
