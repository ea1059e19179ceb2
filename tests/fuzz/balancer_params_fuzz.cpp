// Balancer parameter blocks through the registry (sim/balancers/registry.*: make_balancer). The input
// is an experiment's `balancer:` block, `{name: NAME, params: {...}}`. A balancer that accepted its
// parameters then plans three micro-batches of a GLM-5-like layer at EP 8 on one H100 node, as a replay
// would; it may still refuse there with an InputError, CannotServe or std::invalid_argument (parameters
// or a configuration that the cluster cannot hold, which the replay reports as the user's input), but
// every Plan it returns must pass validate_plan.
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>

#include <yaml-cpp/yaml.h>

#include "sim/balancers/cannot_serve.hpp"
#include "sim/balancers/registry.hpp"
#include "sim/config/loaders.hpp"
#include "sim/plan/plan.hpp"
#include "tests/fuzz/fuzz_input.hpp"

namespace {

struct Cluster {
  epsim::HardwareSpec hardware = epsim::load_hardware((epsim::fuzz::source_dir() / "models/h100-sxm-8.yaml").string());
  epsim::ModelSpec model = epsim::load_model((epsim::fuzz::source_dir() / "models/glm5-like-128.yaml").string());
  epsim::BalancerContext context() const {
    epsim::BalancerContext c;
    c.num_gpus = 8;
    c.gpus_per_node = hardware.gpus_per_node;
    c.model = &model;
    c.hardware = &hardware;
    return c;
  }
};

/// Micro-batch `m`: 8 ranks x 128 experts, a skew that moves from one micro-batch to the next.
epsim::TraceRecord record(std::uint32_t m, int experts) {
  epsim::TraceRecord r;
  r.micro_batch = m;
  for (int rank = 0; rank < 8; ++rank)
    for (int e = 0; e < experts; ++e)
      r.counts.push_back(static_cast<std::uint32_t>(((e * e + 3 * rank + 5 * static_cast<int>(m)) % 23) * 8));
  return r;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const Cluster cluster;
  epsim::BalancerChoice choice;
  try {  // the YAML around the parameters is this harness's, not epsim's
    const YAML::Node block = YAML::Load(std::string(reinterpret_cast<const char*>(data), size));
    if (!block.IsMap() || !block["name"] || !block["name"].IsScalar()) return -1;
    choice.name = block["name"].as<std::string>();
    choice.params = block["params"];
    choice.params_place = "fuzz.yaml:1:1";
  } catch (const YAML::Exception&) {
    return -1;
  }
  epsim::fuzz::expect_only_input_errors([&] {
    std::unique_ptr<epsim::Balancer> balancer = epsim::make_balancer(choice, "fuzz.yaml");
    const epsim::BalancerContext context = cluster.context();
    for (std::uint32_t m = 0; m < 3; ++m) {
      epsim::Plan plan;
      try {
        plan = balancer->plan(record(m, cluster.model.num_experts), context);
      } catch (const epsim::CannotServe&) {
        return;  // a configuration the balancer cannot serve: the replay reports it as an input error
      } catch (const std::invalid_argument&) {
        return;  // so does the replay (sim/replay/replay.cpp) with this one
      }
      try {
        epsim::validate_plan(plan, cluster.model.num_experts, context.gpus_per_node);
      } catch (const std::exception& e) {
        epsim::fuzz::fail(std::string("balancer '") + choice.name + "' made an invalid plan: " + e.what());
      }
    }
  });
  return 0;
}
