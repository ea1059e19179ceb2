// `epsim hardware list` and `epsim hardware show NAME`: the hardware presets of the models folder
// (sim/config/preset_lookup.hpp), each value with its unit and the source its file gives for it.
#include <boost/program_options.hpp>
#include <cstdio>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include "sim/cli/command_line.hpp"
#include "sim/cli/commands.hpp"
#include "sim/config/loaders.hpp"
#include "sim/config/preset_lookup.hpp"
#include "sim/core/input_error.hpp"

namespace po = boost::program_options;

namespace epsim {

namespace {

const char* kUsage =
    "usage:\n"
    "  epsim hardware list         one line per hardware preset of the models folder\n"
    "  epsim hardware show NAME    every value of one preset, with its unit and source\n"
    "The models folder is the source tree's models/ unless EPSIM_MODELS_DIR names another; NAME is a\n"
    "preset's name: or its file stem. See docs/hardware.md.\n";

std::string num(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

/// One scalar key of a hardware file: its path, its value as loaded, and its unit.
struct Row {
  std::string key;
  std::string value;
  std::string unit;
};

/// What the sharing a preset names does, in a few words (docs/performance.md has the measurements).
std::string sharing_meaning(const EngineSpec& engine) {
  switch (engine.bandwidth_sharing) {
    case BandwidthSharing::exact: return "(max-min over every link at every flow start and end)";
    case BandwidthSharing::epochs: return "(exact, a flow's end waiting within engine.epoch_tolerance)";
    case BandwidthSharing::per_link: return "(each link shared on its own)";
    case BandwidthSharing::local: return "(max-min within each GPU's sending and receiving links)";
    case BandwidthSharing::coupled: return "(local, the busiest GPUs' links following their senders)";
    case BandwidthSharing::automatic: break;
  }
  return "(" + auto_ranges(engine, " GPUs") + ")";
}

std::vector<Row> scalar_rows(const HardwareSpec& hw) {
  const EpBackendSpec& ep = hw.ep_backend;
  return {
      {"name", hw.name, ""},
      {"description", hw.description.empty() ? "(none)" : hw.description, ""},
      {"nodes", std::to_string(hw.nodes), "nodes (NVLink domains)"},
      {"gpus_per_node", std::to_string(hw.gpus_per_node), "GPUs per NVLink domain"},
      {"gpu.sms", std::to_string(hw.gpu.sms), "SMs"},
      {"gpu.bf16_peak_TFLOPs", num(hw.gpu.bf16_peak_TFLOPs), "TFLOP/s dense"},
      {"gpu.fp8_peak_TFLOPs", num(hw.gpu.fp8_peak_TFLOPs),
       hw.gpu.fp8_peak_TFLOPs > 0 ? "TFLOP/s dense" : "(no FP8 tensor cores: FP8 GEMMs are refused)"},
      {"gpu.hbm_GBps", num(hw.gpu.hbm_GBps), "GB/s"},
      {"gpu.hbm_capacity_GB", num(hw.gpu.hbm_capacity_GB), "GB"},
      {"gemm.row_alignment", std::to_string(hw.gemm.row_alignment), "rows"},
      {"gemm.launch_us", num(hw.gemm.launch_us), "us"},
      {"copy_engine.bw_GBps", num(hw.copy_engine.bw_GBps), "GB/s"},
      {"copy_engine.fixed_cost_us", num(hw.copy_engine.fixed_cost_us), "us"},
      {"copy_engine.hbm_traffic_factor", num(hw.copy_engine.hbm_traffic_factor), "HBM bytes per byte copied"},
      {"nvlink.port_bw_GBps", num(hw.nvlink.port_bw_GBps), "GB/s per direction"},
      {"nvlink.latency_us", num(hw.nvlink.latency_us), "us"},
      {"infiniband.nic_bw_GBps", num(hw.infiniband.nic_bw_GBps), "GB/s per direction"},
      {"infiniband.latency_us", num(hw.infiniband.latency_us), "us"},
      {"pcie.h2d_GBps", num(hw.pcie.h2d_GBps), "GB/s"},
      {"pcie.d2h_GBps", num(hw.pcie.d2h_GBps), "GB/s"},
      {"pcie.latency_us", num(hw.pcie.latency_us), "us"},
      {"ep_backend.comm_sms", std::to_string(ep.comm_sms), "SMs"},
      {"ep_backend.sm_GBps", num(ep.sm_GBps), ep.sm_GBps > 0 ? "GB/s per SM" : "(the SMs never limit)"},
      {"ep_backend.dispatch_fixed_us", num(ep.dispatch_fixed_us), "us"},
      {"ep_backend.combine_fixed_us", num(ep.combine_fixed_us), "us"},
      {"ep_backend.dispatch_engine", to_string(ep.dispatch_engine), ""},
      {"ep_backend.combine_engine", to_string(ep.combine_engine), ""},
      {"ep_backend.internode_route", ep.internode_route, ""},
      {"ep_backend.token_copies", to_string(ep.token_copies), "copies of a token the exchange moves"},
      {"ep_backend.nvlink_efficiency", num(ep.nvlink_efficiency), "fraction of line rate"},
      {"ep_backend.ib_efficiency", num(ep.ib_efficiency), "fraction of line rate"},
      // How the engine shares link bandwidth: not the hardware's, but what a run on it uses unless
      // the file says otherwise (docs/config.md, `engine`).
      {"engine.bandwidth_sharing", to_string(hw.engine.bandwidth_sharing), sharing_meaning(hw.engine)},
      {"engine.exact_max_gpus", std::to_string(hw.engine.exact_max_gpus), "GPUs (auto: exact up to this many)"},
      {"engine.coupled_max_gpus", std::to_string(hw.engine.coupled_max_gpus),
       "GPUs (auto: coupled up to this many, local beyond)"},
      {"engine.coupled_gpus", num(hw.engine.coupled_gpus), "share of GPUs whose links follow their senders (coupled)"},
      {"engine.epoch_tolerance", num(hw.engine.epoch_tolerance), "idle share a flow's end may leave (epochs)"},
  };
}

struct Curve {
  std::string key;
  std::string x_unit;
  std::string meaning;
  std::vector<std::pair<double, double>> points;
};

std::vector<Curve> curves(const HardwareSpec& hw) {
  std::vector<Curve> out;
  auto gemm = [](const std::vector<GemmEfficiencyPoint>& c) {
    std::vector<std::pair<double, double>> p;
    for (const auto& e : c) p.emplace_back(e.tokens_per_expert, e.efficiency);
    return p;
  };
  out.push_back({"gemm.efficiency", "rows", "fraction of gpu.bf16_peak_TFLOPs vs padded rows per expert",
                 gemm(hw.gemm.efficiency)});
  out.push_back({"gemm.fp8_efficiency", "rows", "fraction of gpu.fp8_peak_TFLOPs vs padded rows per expert",
                 gemm(hw.gemm.fp8_efficiency)});
  std::vector<std::pair<double, double>> msg;
  for (const auto& e : hw.ep_backend.message_efficiency) msg.emplace_back(e.bytes, e.efficiency);
  out.push_back({"ep_backend.message_efficiency", "bytes", "extra efficiency of one message vs its size", msg});
  return out;
}

std::string source_of(const PresetComments& comments, const std::string& key) {
  const auto it = comments.keys.find(key);
  return it != comments.keys.end() ? it->second : "not in the file: the loader's default";
}

int list(const std::vector<std::string>& args) {
  po::options_description options("epsim hardware list: one line per hardware preset, sorted by name");
  options.add_options()("help,h", "show this help");
  if (!parse_command_line(args, options)) return 0;
  const std::string dir = models_dir();
  std::printf("%-16s %-14s %5s %6s %7s %7s %7s  %s\n", "name", "GPUs", "SMs", "BF16", "HBM", "NVLink", "NIC",
              "description");
  std::printf("%-16s %-14s %5s %6s %7s %7s %7s\n", "", "nodes x per", "", "TFLOPs", "GB", "GB/s", "GB/s");
  for (const PresetFile& p : list_presets(dir)) {
    const HardwareSpec hw = load_hardware(p.path);
    const std::string gpus =
        std::to_string(hw.total_gpus()) + " = " + std::to_string(hw.nodes) + "x" + std::to_string(hw.gpus_per_node);
    std::printf("%-16s %-14s %5d %6s %7s %7s %7s  %s\n", p.name.c_str(), gpus.c_str(), hw.gpu.sms,
                num(hw.gpu.bf16_peak_TFLOPs).c_str(), num(hw.gpu.hbm_capacity_GB).c_str(),
                num(hw.nvlink.port_bw_GBps).c_str(), num(hw.infiniband.nic_bw_GBps).c_str(), hw.description.c_str());
  }
  return 0;
}

int show(const std::vector<std::string>& args) {
  std::string name;
  po::options_description options("epsim hardware show NAME: every value of one hardware preset with its unit "
                                  "and source (NAME: its name: or file stem)");
  options.add_options()("help,h", "show this help")("name", po::value(&name), "preset name");
  if (!parse_command_line(args, options, "name")) return 0;
  if (name.empty()) throw InputError("command line", "", "missing NAME (see epsim hardware list)");
  const PresetFile preset = find_preset(name, models_dir());
  const HardwareSpec hw = load_hardware(preset.path);
  const PresetComments comments = read_preset_comments(preset.path);
  std::cout << "hardware preset " << hw.name << " (" << preset.path << "): " << hw.total_gpus() << " GPUs = "
            << hw.nodes << " x " << hw.gpus_per_node << "\n\n";
  for (const Row& r : scalar_rows(hw)) {
    std::cout << "  " << r.key << " = " << r.value << (r.unit.empty() ? "" : " " + r.unit) << "\n";
    if (r.key != "name" && r.key != "description") std::cout << "      source: " << source_of(comments, r.key) << "\n";
  }
  for (const Curve& c : curves(hw)) {
    std::cout << "  " << c.key << " (" << c.meaning << ")";
    if (c.points.empty()) {
      std::cout << ": not given\n      source: " << source_of(comments, c.key) << "\n";
      continue;
    }
    std::cout << "\n      source: " << source_of(comments, c.key) << "\n";
    const auto it = comments.points.find(c.key);
    for (std::size_t i = 0; i < c.points.size(); ++i) {
      std::cout << "      " << num(c.points[i].first) << " " << c.x_unit << ": " << num(c.points[i].second);
      if (it != comments.points.end() && i < it->second.size() && !it->second[i].empty())
        std::cout << "   # " << it->second[i];
      std::cout << "\n";
    }
  }
  return 0;
}

}  // namespace

int hardware_command(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::cout << kUsage;
    return args.empty() ? 2 : 0;
  }
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (args[0] == "list") return list(rest);
  if (args[0] == "show") return show(rest);
  throw InputError("command line", "", "unknown hardware subcommand '" + args[0] + "' (expected list or show)");
}

}  // namespace epsim
