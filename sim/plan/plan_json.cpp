#include "sim/plan/plan_json.hpp"

#include "sim/core/input_error.hpp"

namespace epsim {

namespace {

template <typename Enum, std::size_t N>
Enum enum_from(const nlohmann::json& j, const char* const (&names)[N], const std::string& where,
               const char* field) {
  const std::string s = j.get<std::string>();
  for (std::size_t i = 0; i < N; ++i)
    if (s == names[i]) return static_cast<Enum>(i);
  throw InputError(where, field, "unknown value '" + s + "'");
}

const char* const kCarriers[] = {"ep_backend", "copy_engine", "none"};
const char* const kKinds[] = {"static", "dynamic", "replica"};
const char* const kTransferKinds[] = {"weights", "gradients"};
const char* const kPasses[] = {"forward", "backward"};
const char* const kSites[] = {"none", "host_cpu", "gpu"};
const char* const kStarts[] = {"before_dispatch", "after_dispatch"};

}  // namespace

nlohmann::json plan_to_json(const Plan& plan) {
  nlohmann::json j;
  j["version"] = plan.version;
  j["balancer"] = plan.balancer;
  j["step"] = plan.step;
  j["micro_batch"] = plan.micro_batch;
  j["layer"] = plan.layer;
  j["num_gpus"] = plan.num_gpus;
  j["exchange_stages"] = plan.exchange_stages;
  auto& inst = j["instances"] = nlohmann::json::array();
  for (const auto& i : plan.instances)
    inst.push_back({{"expert", i.expert}, {"gpu", i.gpu}, {"kind", kKinds[static_cast<int>(i.kind)]}});
  auto& routes = j["routes"] = nlohmann::json::array();
  for (const auto& r : plan.routes)
    routes.push_back({{"src_rank", r.src_rank}, {"instance", r.instance}, {"tokens", r.tokens},
                      {"carrier", kCarriers[static_cast<int>(r.carrier)]}, {"via_gpu", r.via_gpu},
                      {"stage", r.stage}});
  auto& transfers = j["transfers"] = nlohmann::json::array();
  for (const auto& t : plan.transfers)
    transfers.push_back({{"kind", kTransferKinds[static_cast<int>(t.kind)]},
                         {"pass", kPasses[static_cast<int>(t.pass)]},
                         {"instance", t.instance}, {"src_gpu", t.src_gpu}, {"dst_gpu", t.dst_gpu},
                         {"bytes", t.bytes}, {"carrier", kCarriers[static_cast<int>(t.carrier)]}});
  auto& order = j["gemm_order"] = nlohmann::json::array();
  for (const auto& groups : plan.gemm_order) {
    nlohmann::json per_gpu = nlohmann::json::array();
    for (const auto& g : groups) per_gpu.push_back(g.instances);
    order.push_back(per_gpu);
  }
  j["planner"] = {{"site", kSites[static_cast<int>(plan.planner.site)]},
                  {"duration_ps", plan.planner.duration_ps},
                  {"start", kStarts[static_cast<int>(plan.planner.start)]},
                  {"d2h_bytes", plan.planner.d2h_bytes}};
  return j;
}

Plan plan_from_json(const nlohmann::json& j, const std::string& where) {
  try {
    Plan plan;
    plan.version = j.at("version").get<int>();
    if (plan.version != kPlanVersion)
      throw InputError(where, "version", "plan version " + std::to_string(plan.version) +
                                             " is not supported (expected " + std::to_string(kPlanVersion) + ")");
    plan.balancer = j.at("balancer").get<std::string>();
    plan.step = j.at("step").get<std::uint32_t>();
    plan.micro_batch = j.at("micro_batch").get<std::uint32_t>();
    plan.layer = j.at("layer").get<std::uint32_t>();
    plan.num_gpus = j.at("num_gpus").get<int>();
    plan.exchange_stages = j.at("exchange_stages").get<int>();
    for (const auto& i : j.at("instances"))
      plan.instances.push_back({i.at("expert").get<int>(), i.at("gpu").get<int>(),
                                enum_from<InstanceKind>(i.at("kind"), kKinds, where, "instances.kind")});
    for (const auto& r : j.at("routes"))
      plan.routes.push_back({r.at("src_rank").get<int>(), r.at("instance").get<int>(),
                             r.at("tokens").get<std::int64_t>(),
                             enum_from<Carrier>(r.at("carrier"), kCarriers, where, "routes.carrier"),
                             r.at("via_gpu").get<int>(), r.at("stage").get<int>()});
    for (const auto& t : j.at("transfers"))
      plan.transfers.push_back({enum_from<TransferKind>(t.at("kind"), kTransferKinds, where, "transfers.kind"),
                                enum_from<PassKind>(t.at("pass"), kPasses, where, "transfers.pass"),
                                t.at("instance").get<int>(), t.at("src_gpu").get<int>(),
                                t.at("dst_gpu").get<int>(), t.at("bytes").get<std::int64_t>(),
                                enum_from<Carrier>(t.at("carrier"), kCarriers, where, "transfers.carrier")});
    int gpu = 0;
    for (const auto& per_gpu : j.at("gemm_order")) {
      std::vector<GemmGroup> groups;
      for (const auto& g : per_gpu) groups.push_back({gpu, g.get<std::vector<int>>()});
      plan.gemm_order.push_back(std::move(groups));
      ++gpu;
    }
    plan.planner.site = enum_from<PlannerSite>(j.at("planner").at("site"), kSites, where, "planner.site");
    plan.planner.duration_ps = j.at("planner").at("duration_ps").get<Time_ps>();
    plan.planner.start = enum_from<PlannerStart>(j.at("planner").at("start"), kStarts, where, "planner.start");
    plan.planner.d2h_bytes = j.at("planner").at("d2h_bytes").get<std::int64_t>();
    return plan;
  } catch (const nlohmann::json::exception& e) {
    throw InputError(where, "", std::string("not a valid plan: ") + e.what());
  }
}

}  // namespace epsim
