// The three YAML loaders. Each reads its file through one ConfigMap per mapping, so every key is
// checked for type, range and spelling, and finish() rejects what no getter asked for. Key names and
// units match the spec structs one to one; docs/config.md lists them with defaults and rules.
#include "sim/config/loaders.hpp"

#include <filesystem>
#include <fstream>
#include <limits>

#include "sim/config/config_file.hpp"
#include "sim/config/config_map.hpp"
#include "sim/core/input_error.hpp"

namespace epsim {
namespace {

namespace fs = std::filesystem;

constexpr double kPositive = 1e-300;  // ConfigMap reads a tiny min as "> 0"
constexpr double kHuge = std::numeric_limits<double>::max();
constexpr std::int64_t kMaxInt = std::numeric_limits<int>::max();

int as_int(std::int64_t v) { return static_cast<int>(v); }

void read_gpu(ConfigMap m, GpuSpec& gpu) {
  gpu.sms = as_int(m.get_int("sms", 1, kMaxInt));
  gpu.bf16_peak_TFLOPs = m.get_double("bf16_peak_TFLOPs", kPositive, kHuge);
  gpu.hbm_GBps = m.get_double("hbm_GBps", kPositive, kHuge);
  gpu.hbm_capacity_GB = m.get_double("hbm_capacity_GB", kPositive, kHuge);
  m.finish();
}

void read_gemm(ConfigMap m, GemmSpec& gemm) {
  gemm.row_alignment = as_int(m.get_int("row_alignment", 1, kMaxInt));
  gemm.launch_us = m.get_double("launch_us", 0, kHuge);
  for (const auto& [tokens, eff] : m.get_curve("efficiency", 1, kPositive, 1.0))
    gemm.efficiency.push_back(GemmEfficiencyPoint{tokens, eff});
  m.finish();
}

void read_ep_backend(ConfigMap m, int sms, EpBackendSpec& ep) {
  ep.comm_sms = as_int(m.get_int("comm_sms", 0, sms - 1));
  ep.internode_route = m.get_choice("internode_route", {"rail_forward", "direct"});
  ep.nvlink_efficiency = m.get_double("nvlink_efficiency", kPositive, 1.0);
  ep.ib_efficiency = m.get_double("ib_efficiency", kPositive, 1.0);
  for (const auto& [bytes, eff] : m.get_curve("message_efficiency", 1, kPositive, 1.0))
    ep.message_efficiency.push_back(MessageEfficiencyPoint{bytes, eff});
  m.finish();
}

}  // namespace

HardwareSpec load_hardware(const std::string& path) {
  ConfigMap top = open_config(path, "hardware");
  HardwareSpec hw;
  hw.source_file = path;
  hw.name = top.get_string("name");
  hw.nodes = as_int(top.get_int("nodes", 1, kMaxInt));
  hw.gpus_per_node = as_int(top.get_int("gpus_per_node", 1, kMaxInt));
  read_gpu(top.get_map("gpu"), hw.gpu);
  read_gemm(top.get_map("gemm"), hw.gemm);
  {
    ConfigMap m = top.get_map("copy_engine");
    hw.copy_engine.bw_GBps = m.get_double("bw_GBps", kPositive, kHuge);
    hw.copy_engine.fixed_cost_us = m.get_double("fixed_cost_us", 0, kHuge);
    hw.copy_engine.hbm_traffic_factor = m.get_double_or("hbm_traffic_factor", 1.0, 0, 4);
    m.finish();
  }
  {
    ConfigMap m = top.get_map("nvlink");
    hw.nvlink.port_bw_GBps = m.get_double("port_bw_GBps", kPositive, kHuge);
    hw.nvlink.latency_us = m.get_double("latency_us", 0, kHuge);
    m.finish();
  }
  {
    ConfigMap m = top.get_map("infiniband");
    hw.infiniband.nic_bw_GBps = m.get_double("nic_bw_GBps", kPositive, kHuge);
    hw.infiniband.latency_us = m.get_double("latency_us", 0, kHuge);
    m.finish();
  }
  {
    ConfigMap m = top.get_map("pcie");
    hw.pcie.h2d_GBps = m.get_double("h2d_GBps", kPositive, kHuge);
    hw.pcie.d2h_GBps = m.get_double("d2h_GBps", kPositive, kHuge);
    hw.pcie.latency_us = m.get_double("latency_us", 0, kHuge);
    m.finish();
  }
  {
    ConfigMap m = top.get_map("host");
    hw.host.kernel_launch_us = m.get_double("kernel_launch_us", 0, kHuge);
    m.finish();
  }
  read_ep_backend(top.get_map("ep_backend"), hw.gpu.sms, hw.ep_backend);
  top.finish();
  return hw;
}

ModelSpec load_model(const std::string& path) {
  ConfigMap top = open_config(path, "model");
  ModelSpec model;
  model.source_file = path;
  model.name = top.get_string("name");
  model.hidden_size = as_int(top.get_int("hidden_size", 1, kMaxInt));
  model.expert_ffn_size = as_int(top.get_int("expert_ffn_size", 1, kMaxInt));
  model.num_experts = as_int(top.get_int("num_experts", 1, kMaxInt));
  model.top_k = as_int(top.get_int("top_k", 1, kMaxInt));
  model.shared_experts = as_int(top.get_int_or("shared_experts", 0, 0, kMaxInt));
  model.shared_expert_ffn_size =
      as_int(model.shared_experts > 0 ? top.get_int("shared_expert_ffn_size", 1, kMaxInt)
                                      : top.get_int_or("shared_expert_ffn_size", 0, 0, kMaxInt));
  model.gated_ffn = top.get_bool("gated_ffn");
  model.dtype_bytes = std::stoi(top.get_choice("dtype_bytes", {"1", "2", "4"}));
  model.tokens_per_microbatch = as_int(top.get_int("tokens_per_microbatch", 1, kMaxInt));
  model.moe_layers = as_int(top.get_int("moe_layers", 1, kMaxInt));
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
  x.ep_degree = as_int(top.get_int("ep_degree", 1, kMaxInt));
  x.placement = top.get_choice_or("placement", "contiguous", {"contiguous", "interleaved"}) == "interleaved"
                    ? Placement::interleaved
                    : Placement::contiguous;
  {
    ConfigMap b = top.get_map("balancer");
    x.balancer.name = b.get_string("name");
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
  if (x.model.num_experts % x.ep_degree != 0)
    top.fail("ep_degree", "EP degree " + std::to_string(x.ep_degree) + " does not divide the " +
                              std::to_string(x.model.num_experts) + " experts of model " + x.model.name);
  return x;
}

}  // namespace epsim
