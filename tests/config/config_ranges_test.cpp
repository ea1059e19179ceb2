// Every hardware and model key has a documented range (docs/config.md) that keeps the engine's
// arithmetic finite: absurd values (a bandwidth of 1 byte/s, 1e-299 TFLOP/s, a latency of 1e300 us, a
// cluster whose GPU count overflows an int) are refused at their line, not simulated.
#include <doctest/doctest.h>

#include <string>

#include "sim/config/loaders.hpp"
#include "sim/core/input_error.hpp"
#include "tests/cli/run_cli.hpp"
#include "tests/test_paths.hpp"

namespace {

using epsim::InputError;

/// The valid hardware fixture with `from` replaced by `to` (which must occur once).
const char* const kHardware = R"(kind: hardware
name: tiny
nodes: 1
gpus_per_node: 8
gpu: {sms: 132, bf16_peak_TFLOPs: 989.4, hbm_GBps: 2800, hbm_capacity_GB: 80}
gemm: {row_alignment: 128, launch_us: 4, efficiency: [[128, 0.2], [8192, 0.75]]}
copy_engine: {bw_GBps: 390, fixed_cost_us: 2.5}
nvlink: {port_bw_GBps: 450, latency_us: 1}
infiniband: {nic_bw_GBps: 50, latency_us: 2.5}
pcie: {h2d_GBps: 55.4, d2h_GBps: 55.2, latency_us: 2.5}
ep_backend: {comm_sms: 20, internode_route: rail_forward, nvlink_efficiency: 0.822, ib_efficiency: 0.97, message_efficiency: [[4096, 0.25], [1048576, 1.0]]}
)";

const char* const kModel = R"(kind: model
name: small
hidden_size: 1024
expert_ffn_size: 512
num_experts: 8
top_k: 2
gated_ffn: true
dtype_bytes: 2
)";

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  REQUIRE(at != std::string::npos);
  REQUIRE(text.find(from, at + 1) == std::string::npos);
  return text.replace(at, from.size(), to);
}

/// The InputError message of loading `text` as a file of `kind`, or "" when it loads.
std::string load_error(const std::string& kind, const std::string& text) {
  const auto dir = epsim::test::scratch_dir("config-ranges");
  const std::string path = (dir / (kind + ".yaml")).string();
  epsim::test::write_file(path, text);
  try {
    if (kind == "hardware") epsim::load_hardware(path);
    if (kind == "model") epsim::load_model(path);
  } catch (const InputError& e) {
    const std::string what = e.what();
    return what.substr(what.find(".yaml:") + 6);  // without the scratch path
  }
  return "";
}

}  // namespace

TEST_CASE("hardware: absurd bandwidths, rates and latencies are refused at their line") {
  CHECK(load_error("hardware", kHardware) == "");
  CHECK(load_error("hardware", replaced(kHardware, "port_bw_GBps: 450", "port_bw_GBps: 1e-9")) ==
        "8:24: nvlink.port_bw_GBps: expected a number in [0.001, 1000000], got 1e-9");
  CHECK(load_error("hardware", replaced(kHardware, "bf16_peak_TFLOPs: 989.4", "bf16_peak_TFLOPs: 1e-299")) ==
        "5:35: gpu.bf16_peak_TFLOPs: expected a number in [0.001, 1000000], got 1e-299");
  CHECK(load_error("hardware", replaced(kHardware, "latency_us: 2.5}\npcie", "latency_us: 1e300}\npcie")) ==
        "9:43: infiniband.latency_us: expected a number in [0, 1000000], got 1e300");
  CHECK(load_error("hardware", replaced(kHardware, "hbm_capacity_GB: 80", "hbm_capacity_GB: 1e308")) ==
        "5:75: gpu.hbm_capacity_GB: expected a number in [0.001, 1000000], got 1e308");
  CHECK(load_error("hardware", replaced(kHardware, "[8192, 0.75]", "[8192, 1e-200]")) ==
        "6:67: gemm.efficiency[1]: y expected in [0.001, 1], got 1e-200");
  CHECK(load_error("hardware", replaced(kHardware, "sms: 132", "sms: 1000000")) ==
        "5:12: gpu.sms: expected an integer in [1, 65536], got 1000000");
  // The extremes themselves load.
  CHECK(load_error("hardware", replaced(kHardware, "port_bw_GBps: 450, latency_us: 1",
                                        "port_bw_GBps: 0.001, latency_us: 1000000")) == "");
}

TEST_CASE("hardware: nodes x gpus_per_node may not overflow or exceed 65536 GPUs") {
  // 65536 x 65536 = 2^32: the product overflowed int (total_gpus() became 0) and was accepted.
  CHECK(load_error("hardware", replaced(replaced(kHardware, "nodes: 1", "nodes: 65536"), "gpus_per_node: 8",
                                        "gpus_per_node: 65536")) ==
        "4:1: nodes x gpus_per_node = 65536 x 65536 = 4294967296 GPUs, more than epsim's limit of 65536");
  CHECK(load_error("hardware", replaced(replaced(kHardware, "nodes: 1", "nodes: 8193"), "gpus_per_node: 8",
                                        "gpus_per_node: 8")) ==
        "4:1: nodes x gpus_per_node = 8193 x 8 = 65544 GPUs, more than epsim's limit of 65536");
  CHECK(load_error("hardware", replaced(kHardware, "nodes: 1", "nodes: 8192")) == "");  // 65536 GPUs
  CHECK(load_error("hardware", replaced(kHardware, "nodes: 1", "nodes: 3000000000")) ==
        "3:8: nodes: expected an integer in [1, 65536], got 3000000000");
}

TEST_CASE("hardware: host.kernel_launch_us is refused, not silently ignored") {
  CHECK(load_error("hardware", std::string(kHardware) + "host: {kernel_launch_us: 2.8}\n") ==
        "12:1: host.kernel_launch_us is no longer read: the launch cost of a grouped GEMM is part of "
        "gemm.launch_us and a copy's enqueue is part of copy_engine.fixed_cost_us; remove the host block");
}

TEST_CASE("model: sizes within the trace format's and the engine's limits, moe_layers optional") {
  const auto dir = epsim::test::scratch_dir("config-ranges-model");
  epsim::test::write_file(dir / "m.yaml", kModel);
  const epsim::ModelSpec m = epsim::load_model((dir / "m.yaml").string());
  CHECK(m.moe_layers == 1);
  CHECK(load_error("model", std::string(kModel) + "moe_layers: 48\n") == "");
  CHECK(load_error("model", std::string(kModel) + "moe_layers: 0\n") ==
        "9:13: moe_layers: expected an integer in [1, 4096], got 0");
  CHECK(load_error("model", replaced(kModel, "num_experts: 8", "num_experts: 70000")) ==
        "5:14: num_experts: expected an integer in [1, 65536], got 70000");
  CHECK(load_error("model", replaced(kModel, "hidden_size: 1024", "hidden_size: 2000000000")) ==
        "3:14: hidden_size: expected an integer in [1, 1048576], got 2000000000");
  CHECK(load_error("model", replaced(kModel, "top_k: 2", "top_k: 2000")) ==
        "6:8: top_k: expected an integer in [1, 1024], got 2000");
  CHECK(load_error("model", std::string(kModel) + "tokens_per_microbatch: 4096\n") ==
        "9:1: tokens_per_microbatch is no longer read: the trace gives the tokens each rank feeds every MoE "
        "layer; remove the key");
}

TEST_CASE("hardware: ep_backend.token_copies is one of three, and per_node needs rail forwarding") {
  CHECK(load_error("hardware", replaced(kHardware, "internode_route: rail_forward",
                                        "internode_route: rail_forward, token_copies: per_node")) == "");
  const std::string bad = load_error("hardware", replaced(kHardware, "internode_route: rail_forward",
                                                          "internode_route: rail_forward, token_copies: per_rank"));
  CHECK(bad.find("ep_backend.token_copies") != std::string::npos);
  CHECK(bad.find("per_expert, per_gpu, per_node") != std::string::npos);
  const std::string direct = load_error("hardware", replaced(kHardware, "internode_route: rail_forward",
                                                             "internode_route: direct, token_copies: per_node"));
  CHECK(direct.find("needs internode_route rail_forward, not 'direct'") != std::string::npos);
}
