// The three YAML loaders. Each reads its file through one ConfigMap per mapping, so every key is
// checked for type, range and spelling, and finish() rejects what no getter asked for. Key names and
// units match the spec structs one to one; docs/config.md lists them with defaults and rules.
#include "sim/config/loaders.hpp"

#include "sim/balancers/registry.hpp"

#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>

#include "sim/config/config_file.hpp"
#include "sim/config/config_map.hpp"
#include "sim/core/input_error.hpp"

namespace epsim {
namespace {

namespace fs = std::filesystem;

// Ranges. Each is far wider than any real cluster or model, and narrow enough that the engine's
// arithmetic stays finite: rates and bandwidths from 1 MB/s (1 GFLOP/s) to 1 PB/s (1 EFLOP/s), so a
// byte or FLOP count turns into a finite double of picoseconds; latencies and fixed costs up to one
// second each; efficiencies down to 0.1%. A product of extremes that still lands beyond the simulation
// horizon (kMaxTime_ps, e.g. 1 MB/s for terabytes of tokens) stops the replay with an InputError.
constexpr double kMinRate = 1e-3;        // GB/s, TFLOP/s, GB
constexpr double kMaxRate = 1e6;
constexpr double kMaxLatency_us = 1e6;   // one second
constexpr double kMinEfficiency = 1e-3;
/// GPUs in a cluster, and the EP degree: the plan's and the trace format's limit on GPUs and ranks.
constexpr std::int64_t kMaxGpus = 1 << 16;
constexpr std::int64_t kMaxSms = 1 << 16;
constexpr std::int64_t kMaxRowAlignment = 1 << 20;
/// Hidden and FFN sizes: one expert matrix of 2^20 x 2^20 four-byte elements is 4 TB, and weight
/// byte counts stay far below 2^63.
constexpr std::int64_t kMaxModelDim = 1 << 20;
constexpr std::int64_t kMaxExperts = 1 << 16;  // the trace format stores expert ids as 16 bits
constexpr std::int64_t kMaxTopK = 1024;         // the trace format's limit
constexpr std::int64_t kMaxMoeLayers = 1 << 12;
constexpr std::int64_t kMaxInt = std::numeric_limits<int>::max();

int as_int(std::int64_t v) { return static_cast<int>(v); }

void read_gpu(ConfigMap m, GpuSpec& gpu) {
  gpu.sms = as_int(m.get_int("sms", 1, kMaxSms));
  gpu.bf16_peak_TFLOPs = m.get_double("bf16_peak_TFLOPs", kMinRate, kMaxRate);
  gpu.fp8_peak_TFLOPs = m.get_double_or("fp8_peak_TFLOPs", 0, 0, kMaxRate);
  gpu.hbm_GBps = m.get_double("hbm_GBps", kMinRate, kMaxRate);
  gpu.hbm_capacity_GB = m.get_double("hbm_capacity_GB", kMinRate, kMaxRate);
  m.finish();
}

void read_gemm(ConfigMap m, GemmSpec& gemm) {
  gemm.row_alignment = as_int(m.get_int("row_alignment", 1, kMaxRowAlignment));
  gemm.launch_us = m.get_double("launch_us", 0, kMaxLatency_us);
  for (const auto& [tokens, eff] : m.get_curve("efficiency", 1, kMinEfficiency, 1.0))
    gemm.efficiency.push_back(GemmEfficiencyPoint{tokens, eff});
  if (m.has("fp8_efficiency"))
    for (const auto& [tokens, eff] : m.get_curve("fp8_efficiency", 1, kMinEfficiency, 1.0))
      gemm.fp8_efficiency.push_back(GemmEfficiencyPoint{tokens, eff});
  m.finish();
}

void read_ep_backend(ConfigMap m, int sms, EpBackendSpec& ep) {
  ep.comm_sms = as_int(m.get_int("comm_sms", 0, sms - 1));
  ep.sm_GBps = m.get_double_or("sm_GBps", 0, 0, kMaxRate);
  ep.dispatch_fixed_us = m.get_double_or("dispatch_fixed_us", 0, 0, kMaxLatency_us);
  ep.combine_fixed_us = m.get_double_or("combine_fixed_us", 0, 0, kMaxLatency_us);
  auto engine = [&](const std::string& key) {
    return m.get_choice_or(key, "sms", {"sms", "copy_engine"}) == "sms" ? CommEngine::sms : CommEngine::copy_engine;
  };
  ep.dispatch_engine = engine("dispatch_engine");
  ep.combine_engine = engine("combine_engine");
  ep.internode_route = m.get_choice("internode_route", {"rail_forward", "direct"});
  const std::string copies = m.get_choice_or("token_copies", "per_expert", {"per_expert", "per_gpu", "per_node"});
  ep.token_copies = copies == "per_node" ? TokenCopies::per_node
                    : copies == "per_gpu" ? TokenCopies::per_gpu
                                          : TokenCopies::per_expert;
  if (ep.token_copies == TokenCopies::per_node && ep.internode_route != "rail_forward")
    m.fail("token_copies", "token_copies per_node sends each token once per node to the rail peer, which needs "
                           "internode_route rail_forward, not '" + ep.internode_route + "'");
  ep.nvlink_efficiency = m.get_double("nvlink_efficiency", kMinEfficiency, 1.0);
  ep.ib_efficiency = m.get_double("ib_efficiency", kMinEfficiency, 1.0);
  for (const auto& [bytes, eff] : m.get_curve("message_efficiency", 1, kMinEfficiency, 1.0))
    ep.message_efficiency.push_back(MessageEfficiencyPoint{bytes, eff});
  m.finish();
}

/// Parameters and FLOPs of one layer's attention: generous for any model (a trillion), finite in doubles.
constexpr std::int64_t kMaxLayerParams = std::int64_t{1} << 40;
constexpr double kMaxPerPosition = 1e12;
/// Vocabulary and sequence lengths: the trace format's 32-bit token counts bound what a step can hold.
constexpr std::int64_t kMaxVocab = std::int64_t{1} << 24;
constexpr std::int64_t kMaxSequence = std::int64_t{1} << 30;

// The model's optional non-MoE block (docs/step.md): what a step adds to its MoE layers.
void read_non_moe(ConfigMap& n, ModelSpec& model) {
  NonMoeSpec& s = model.non_moe;
  s.layers = as_int(n.get_int("layers", 1, kMaxMoeLayers));
  s.dense_layers = as_int(n.get_int_or("dense_layers", 0, 0, kMaxMoeLayers));
  if (s.dense_layers >= s.layers)
    n.fail("dense_layers", "non_moe.dense_layers " + std::to_string(s.dense_layers) +
                               " leaves no MoE layer among the " + std::to_string(s.layers) + " layers");
  s.dense_ffn_size = as_int(s.dense_layers > 0 ? n.get_int("dense_ffn_size", 1, kMaxModelDim)
                                               : n.get_int_or("dense_ffn_size", 0, 0, kMaxModelDim));
  s.attention_params = n.get_int("attention_params", 0, kMaxLayerParams);
  s.attention_gemm_calls = as_int(n.get_int_or("attention_gemm_calls", 4, 0, 1024));
  s.attention_flops_per_position = n.get_double("attention_flops_per_position", 0, kMaxPerPosition);
  s.kv_cache_bytes_per_position = n.get_double("kv_cache_bytes_per_position", 0, kMaxPerPosition);
  s.elementwise_bytes_per_token = n.get_double_or("elementwise_bytes_per_token", 0, 0, kMaxPerPosition);
  s.vocab_size = as_int(n.get_int_or("vocab_size", 0, 0, kMaxVocab));
  s.gemm = parse_dtype(n.get_choice_or("gemm", to_string(dtype_of_bytes(model.dtype_bytes)), dtype_names()));
  n.finish();
}

// The experiment's optional step block, checked against the model and hardware it names.
StepSpec read_step(ConfigMap& m, const ExperimentSpec& x) {
  StepSpec s;
  const std::string mode = m.get_choice("mode", {"training", "prefill", "decode"});
  s.mode = mode == "training" ? StepMode::training : mode == "prefill" ? StepMode::prefill : StepMode::decode;
  s.sequence_length = as_int(m.get_int("sequence_length", 1, kMaxSequence));
  s.overlap = m.get_choice_or("overlap", "none", {"none", "two_micro_batch"}) == "none" ? StepOverlap::none
                                                                                         : StepOverlap::two_micro_batch;
  m.finish();
  if (!x.model.non_moe.described())
    m.fail("", "step: model '" + x.model.name + "' (" + x.model.source_file +
                   ") has no non_moe block, which a step prediction needs (docs/step.md)");
  if ((s.mode == StepMode::training) != x.backward)
    m.fail("mode", std::string("step.mode ") + mode + (x.backward ? " runs forward only: set backward: false"
                                                                   : " runs forward and backward: set backward: true"));
  if (x.model.non_moe.gemm == Dtype::fp8 &&
      (x.hardware.gpu.fp8_peak_TFLOPs <= 0 || x.hardware.gemm.fp8_efficiency.empty()))
    m.fail("", "step: model '" + x.model.name + "' runs its non-MoE GEMMs in fp8 but hardware " + x.hardware.name +
                   " gives no gpu.fp8_peak_TFLOPs or gemm.fp8_efficiency");
  return s;
}

}  // namespace

HardwareSpec load_hardware(const std::string& path) {
  ConfigMap top = open_config(path, "hardware");
  HardwareSpec hw;
  hw.source_file = path;
  hw.name = top.get_string("name");
  hw.description = top.get_string_or("description", "");
  hw.nodes = as_int(top.get_int("nodes", 1, kMaxGpus));
  hw.gpus_per_node = as_int(top.get_int("gpus_per_node", 1, kMaxGpus));
  if (static_cast<std::int64_t>(hw.nodes) * hw.gpus_per_node > kMaxGpus)
    top.fail("gpus_per_node", "nodes x gpus_per_node = " + std::to_string(hw.nodes) + " x " +
                                  std::to_string(hw.gpus_per_node) + " = " +
                                  std::to_string(static_cast<std::int64_t>(hw.nodes) * hw.gpus_per_node) +
                                  " GPUs, more than epsim's limit of " + std::to_string(kMaxGpus));
  read_gpu(top.get_map("gpu"), hw.gpu);
  read_gemm(top.get_map("gemm"), hw.gemm);
  {
    ConfigMap m = top.get_map("copy_engine");
    hw.copy_engine.bw_GBps = m.get_double("bw_GBps", kMinRate, kMaxRate);
    hw.copy_engine.fixed_cost_us = m.get_double("fixed_cost_us", 0, kMaxLatency_us);
    hw.copy_engine.hbm_traffic_factor = m.get_double_or("hbm_traffic_factor", 1.0, 0, 4);
    m.finish();
  }
  {
    ConfigMap m = top.get_map("nvlink");
    hw.nvlink.port_bw_GBps = m.get_double("port_bw_GBps", kMinRate, kMaxRate);
    hw.nvlink.latency_us = m.get_double("latency_us", 0, kMaxLatency_us);
    m.finish();
  }
  {
    ConfigMap m = top.get_map("infiniband");
    hw.infiniband.nic_bw_GBps = m.get_double("nic_bw_GBps", kMinRate, kMaxRate);
    hw.infiniband.latency_us = m.get_double("latency_us", 0, kMaxLatency_us);
    m.finish();
  }
  {
    ConfigMap m = top.get_map("pcie");
    hw.pcie.h2d_GBps = m.get_double("h2d_GBps", kMinRate, kMaxRate);
    hw.pcie.d2h_GBps = m.get_double("d2h_GBps", kMinRate, kMaxRate);
    hw.pcie.latency_us = m.get_double("latency_us", 0, kMaxLatency_us);
    m.finish();
  }
  // Kernel launch costs are part of gemm.launch_us and copy_engine.fixed_cost_us; a separate host
  // launch cost would count them twice, so the key that used to hold one is refused, not ignored.
  if (top.has("host")) {
    top.get_raw("host");
    top.fail("host", "host.kernel_launch_us is no longer read: the launch cost of a grouped GEMM is part of "
                     "gemm.launch_us and a copy's enqueue is part of copy_engine.fixed_cost_us; remove the host "
                     "block");
  }
  read_ep_backend(top.get_map("ep_backend"), hw.gpu.sms, hw.ep_backend);
  if (std::optional<ConfigMap> m = top.get_map_opt("engine")) {
    const std::string sharing =
        m->get_choice_or("bandwidth_sharing", "auto", {"exact", "epochs", "per_link", "local", "coupled", "auto"});
    hw.engine.bandwidth_sharing = *bandwidth_sharing_from_string(sharing);  // (one of the choices)
    hw.engine.exact_max_gpus = as_int(m->get_int_or("exact_max_gpus", hw.engine.exact_max_gpus, 1, kMaxGpus));
    hw.engine.coupled_max_gpus = as_int(m->get_int_or("coupled_max_gpus", hw.engine.coupled_max_gpus, 0, kMaxGpus));
    hw.engine.epoch_tolerance = m->get_double_or("epoch_tolerance", hw.engine.epoch_tolerance, 0, 0.1);
    hw.engine.coupled_gpus = m->get_double_or("coupled_gpus", hw.engine.coupled_gpus, 0, 1);
    if (!(hw.engine.coupled_gpus > 0)) m->fail("coupled_gpus", "engine.coupled_gpus must be in (0, 1], the share of GPUs whose links follow");
    m->finish();
  }
  top.finish();
  if (!hw.gemm.fp8_efficiency.empty() && hw.gpu.fp8_peak_TFLOPs <= 0)
    top.fail("gemm", "gemm.fp8_efficiency is given but gpu.fp8_peak_TFLOPs is not: an FP8 efficiency needs the "
                     "FP8 peak it is a fraction of");
  return hw;
}

ModelSpec load_model(const std::string& path) {
  ConfigMap top = open_config(path, "model");
  ModelSpec model;
  model.source_file = path;
  model.name = top.get_string("name");
  model.hidden_size = as_int(top.get_int("hidden_size", 1, kMaxModelDim));
  model.expert_ffn_size = as_int(top.get_int("expert_ffn_size", 1, kMaxModelDim));
  model.num_experts = as_int(top.get_int("num_experts", 1, kMaxExperts));
  model.top_k = as_int(top.get_int("top_k", 1, kMaxTopK));
  model.shared_experts = as_int(top.get_int_or("shared_experts", 0, 0, kMaxTopK));
  model.shared_expert_ffn_size =
      as_int(model.shared_experts > 0 ? top.get_int("shared_expert_ffn_size", 1, kMaxModelDim)
                                      : top.get_int_or("shared_expert_ffn_size", 0, 0, kMaxModelDim));
  model.gated_ffn = top.get_bool("gated_ffn");
  model.dtype_bytes = std::stoi(top.get_choice("dtype_bytes", {"1", "2", "4"}));
  // The trace gives every rank's tokens per record; a second figure here could only disagree with it.
  if (top.has("tokens_per_microbatch")) {
    top.get_raw("tokens_per_microbatch");
    top.fail("tokens_per_microbatch",
             "tokens_per_microbatch is no longer read: the trace gives the tokens each rank feeds every MoE "
             "layer; remove the key");
  }
  model.moe_layers = as_int(top.get_int_or("moe_layers", 1, 1, kMaxMoeLayers));
  {
    // Every phase defaults to the model's own dtype.
    const std::string base = to_string(dtype_of_bytes(model.dtype_bytes));
    PrecisionSpec& p = model.precision;
    std::optional<ConfigMap> m = top.get_map_opt("precision");
    ConfigMap empty(YAML::Node(), path, "precision");
    ConfigMap& pm = m ? *m : empty;
    auto dtype = [&](const std::string& key) { return parse_dtype(pm.get_choice_or(key, base, dtype_names())); };
    p.dispatch = dtype("dispatch");
    p.combine = dtype("combine");
    p.grad_dispatch = dtype("grad_dispatch");
    p.grad_combine = dtype("grad_combine");
    p.gemm = dtype("gemm");
    p.fp8_scale_block = as_int(pm.get_int_or("fp8_scale_block", 128, 1, kMaxModelDim));
    p.set = true;
    pm.finish();
  }
  if (std::optional<ConfigMap> r = top.get_map_opt("routing")) {
    model.routing.groups = as_int(r->get_int("groups", 1, kMaxExperts));
    model.routing.groups_per_token = as_int(r->get_int("groups_per_token", 1, kMaxExperts));
    if (model.routing.groups_per_token > model.routing.groups)
      r->fail("groups_per_token", "routing.groups_per_token " + std::to_string(model.routing.groups_per_token) +
                                      " exceeds routing.groups " + std::to_string(model.routing.groups));
    if (model.num_experts % model.routing.groups != 0)
      r->fail("groups", "routing.groups " + std::to_string(model.routing.groups) + " does not divide the " +
                            std::to_string(model.num_experts) + " experts into equal groups");
    const int per_group = model.num_experts / model.routing.groups;
    if (static_cast<std::int64_t>(per_group) * model.routing.groups_per_token < model.top_k)
      r->fail("groups_per_token", "routing: " + std::to_string(model.routing.groups_per_token) + " groups of " +
                                      std::to_string(per_group) + " experts hold fewer than top_k " +
                                      std::to_string(model.top_k) + " experts");
    r->finish();
  }
  if (std::optional<ConfigMap> n = top.get_map_opt("non_moe")) read_non_moe(*n, model);
  top.finish();
  if (model.top_k > model.num_experts)
    top.fail("top_k", "top_k " + std::to_string(model.top_k) + " exceeds num_experts " +
                          std::to_string(model.num_experts));
  return model;
}

ExperimentSpec load_experiment(const std::string& path) {
  ConfigMap top = open_config(path, "experiment");
  ExperimentSpec x;
  x.source_file = path;
  x.name = top.get_string("name");
  const std::string trace = top.get_string("trace");
  const std::string model = top.get_string("model");
  const std::string hardware = top.get_string("hardware");
  x.ep_degree = as_int(top.get_int("ep_degree", 1, kMaxGpus));
  x.placement = top.get_choice_or("placement", "contiguous", {"contiguous", "interleaved"}) == "interleaved"
                    ? Placement::interleaved
                    : Placement::contiguous;
  {
    ConfigMap b = top.get_map("balancer");
    x.balancer.name = b.get_string("name");
    if (x.balancer.name == "oracle") b.fail("name", kOracleIsABound);
    const std::string at = b.where(b.has("params") ? "params" : "");
    x.balancer.params_place = at.substr(0, at.rfind(':'));  // file:line
    x.balancer.params = b.get_raw("params");
    if (x.balancer.params.IsDefined() && !x.balancer.params.IsNull() && !x.balancer.params.IsMap())
      b.fail("params", "balancer.params: expected a mapping of the balancer's parameters");
    b.finish();
  }
  x.output_dir = top.get_string("output");
  x.seed = static_cast<std::uint64_t>(top.get_int_or("seed", 0, 0, std::numeric_limits<std::int64_t>::max()));
  x.backward = top.get_bool_or("backward", true);
  x.max_records = as_int(top.get_int_or("max_records", 0, 0, kMaxInt));
  x.timeline_records = as_int(top.get_int_or("timeline_records", 4, 0, kMaxInt));
  std::optional<ConfigMap> step = top.get_map_opt("step");
  top.finish();

  // Paths are relative to the experiment file's folder, kept relative (lexically normalised) so that
  // outputs do not depend on the machine, yet open from any working directory.
  const fs::path folder = fs::path(path).parent_path();
  auto resolve = [&](const std::string& key, const std::string& written) {
    const std::string resolved = (folder / written).lexically_normal().string();
    std::error_code ec;
    if (!fs::is_regular_file(resolved, ec))
      top.fail(key, key + " file '" + resolved + "' " +
                        (fs::exists(resolved, ec) ? "is not a regular file" : "does not exist") + " (" + key +
                        ": " + written + ", relative to the experiment file's folder)");
    return resolved;
  };
  x.trace_path = resolve("trace", trace);
  x.model = load_model(resolve("model", model));
  x.hardware = load_hardware(resolve("hardware", hardware));

  if (x.ep_degree > x.hardware.total_gpus())
    top.fail("ep_degree", "impossible cluster: ep_degree " + std::to_string(x.ep_degree) + " needs " +
                              std::to_string(x.ep_degree) + " GPUs, hardware " + x.hardware.name + " has " +
                              std::to_string(x.hardware.total_gpus()));
  if (x.model.precision.gemm == Dtype::fp8 &&
      (x.hardware.gpu.fp8_peak_TFLOPs <= 0 || x.hardware.gemm.fp8_efficiency.empty()))
    top.fail("model", "model " + x.model.name + " runs its expert GEMMs in FP8 (precision.gemm: fp8) but hardware " +
                          x.hardware.name + " gives no gpu.fp8_peak_TFLOPs and gemm.fp8_efficiency");
  if (x.model.num_experts % x.ep_degree != 0)
    top.fail("ep_degree", "EP degree " + std::to_string(x.ep_degree) + " does not divide the " +
                              std::to_string(x.model.num_experts) + " experts of model " + x.model.name);
  if (step) x.step = read_step(*step, x);
  return x;
}

}  // namespace epsim
