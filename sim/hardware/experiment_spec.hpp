// One simulation run, as loaded from an experiment YAML file (kind: experiment). Paths inside an
// experiment file are relative to that file's folder; the loader resolves them.
#pragma once

#include <cstdint>
#include <optional>
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

/// What a step is (docs/step.md): training runs forward and backward over sequences of
/// `sequence_length`; prefill runs forward over such sequences; decode runs forward for one new token
/// per sequence with `sequence_length` positions of context in the KV cache.
enum class StepMode { training, prefill, decode };
/// How a layer's communication meets its computation: one after the other, or two micro-batches
/// interleaved so that one's communication runs under the other's computation.
enum class StepOverlap { none, two_micro_batch };

struct StepSpec {
  StepMode mode = StepMode::training;
  int sequence_length = 0;
  StepOverlap overlap = StepOverlap::none;
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
  std::optional<StepSpec> step;  ///< the step-level prediction, when the experiment asks for one
};

}  // namespace epsim
