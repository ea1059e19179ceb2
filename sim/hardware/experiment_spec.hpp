// One simulation run, as loaded from an experiment YAML file (kind: experiment). Paths inside an
// experiment file are relative to that file's folder; the loader resolves them.
#pragma once

#include <cstdint>
#include <string>

#include <yaml-cpp/yaml.h>

#include "sim/hardware/hardware_spec.hpp"
#include "sim/hardware/model_spec.hpp"

namespace epsim {

enum class Placement { contiguous, interleaved };

struct BalancerChoice {
  std::string name;     ///< registry name, e.g. "static_ep"
  YAML::Node params;    ///< the balancer's own parameters (validated by the balancer), may be null
  std::string params_place;  ///< file:line of the params block, for messages
};

struct ExperimentSpec {
  std::string name;
  std::string source_file;
  std::string trace_path;  ///< resolved
  ModelSpec model;
  HardwareSpec hardware;
  BalancerChoice balancer;
  int ep_degree = 0;
  Placement placement = Placement::contiguous;
  std::string output_dir;  ///< as written (relative to the working directory) unless overridden
  std::uint64_t seed = 0;
  bool backward = true;    ///< simulate the backward pass of each layer too
  int max_records = 0;     ///< 0 = every (step, micro-batch, layer) record of the trace
  int timeline_records = 0;  ///< how many records go into the Perfetto timeline
};

}  // namespace epsim
