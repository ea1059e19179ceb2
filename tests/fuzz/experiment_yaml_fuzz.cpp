// The experiment YAML loader (sim/config/loaders.*: load_experiment), which also loads the model and
// hardware files it names, checks the trace, and builds the balancer's parameter block.
#include <cstddef>
#include <cstdint>

#include "sim/balancers/registry.hpp"
#include "sim/config/loaders.hpp"
#include "tests/fuzz/config_tree.hpp"
#include "tests/fuzz/fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = epsim::fuzz::config_input_path("fuzz-input.yaml");
  epsim::fuzz::write_bytes(path, data, size);
  epsim::fuzz::expect_only_input_errors([&] {
    const epsim::ExperimentSpec spec = epsim::load_experiment(path);
    epsim::make_balancer(spec.balancer, spec.source_file);  // as `epsim run` does next
  });
  return 0;
}
