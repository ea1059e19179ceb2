#include "hw/host/plan_tasks.hpp"

#include <algorithm>
#include <stdexcept>

#include "sim/validate/plans_file.hpp"

namespace epsim::hw {

std::int64_t token_bytes(int hidden, int dtype_bytes) {
  return static_cast<std::int64_t>(hidden) * dtype_bytes;
}

GpuTasks extract_gpu_tasks(const Plan& plan, int gpu, int hidden, int dtype_bytes) {
  if (gpu < 0 || gpu >= plan.num_gpus)
    throw std::invalid_argument("gpu " + std::to_string(gpu) + " is outside the plan's " +
                                std::to_string(plan.num_gpus) + " GPUs");
  GpuTasks out;
  out.gpu = gpu;
  out.step = plan.step;
  out.micro_batch = plan.micro_batch;
  out.layer = plan.layer;
  const auto tokens = plan.tokens_per_instance();

  std::vector<GemmTask> forward;
  if (static_cast<std::size_t>(gpu) < plan.gemm_order.size()) {
    for (const auto& group : plan.gemm_order[gpu]) {
      GemmTask t;
      t.pass = Pass::forward;
      // The simulator's task names, so that `epsim validate` pairs them (docs/validation.md).
      t.name = "gemm fwd";
      t.instances = group.instances;
      for (int i : group.instances) t.tokens.push_back(tokens.at(static_cast<std::size_t>(i)));
      forward.push_back(t);
    }
  }
  for (const auto& t : forward) out.gemms.push_back(t);
  for (std::size_t k = 0; k < forward.size(); ++k) {
    GemmTask t = forward[k];
    t.pass = Pass::backward;
    t.name = "gemm dgrad";
    out.gemms.push_back(t);
  }
  for (std::size_t k = 0; k < forward.size(); ++k) {
    GemmTask t = forward[k];
    t.pass = Pass::backward;
    t.name = "gemm wgrad";
    out.gemms.push_back(t);
  }

  // GEMM group of each instance on this GPU: forward index k; dgrad n + k; wgrad 2n + k.
  const int n = static_cast<int>(forward.size());
  std::vector<int> group_of(plan.instances.size(), -1);
  for (int k = 0; k < n; ++k)
    for (int i : forward[static_cast<std::size_t>(k)].instances) group_of.at(static_cast<std::size_t>(i)) = k;
  auto after = [&](int instance, int offset) {
    const int k = group_of.at(static_cast<std::size_t>(instance));
    return k < 0 ? -1 : offset + k;
  };
  const std::int64_t per_token = token_bytes(hidden, dtype_bytes);
  auto instance_gpu = [&](int i) { return plan.instances.at(static_cast<std::size_t>(i)).gpu; };
  std::vector<CopyTask> fwd, bwd;
  for (const auto& tr : plan.transfers) {
    if (tr.carrier != Carrier::copy_engine || tr.src_gpu != gpu || tr.bytes <= 0) continue;
    CopyTask c;
    c.pass = tr.pass == PassKind::forward ? Pass::forward : Pass::backward;
    c.name = std::string(tr.kind == TransferKind::weights ? "weights e" : "grads e") +
             std::to_string(plan.instances.at(static_cast<std::size_t>(tr.instance)).expert);
    c.bytes = tr.bytes;
    c.dst_gpu = tr.dst_gpu;
    if (tr.kind == TransferKind::gradients) c.after_gemm = after(tr.instance, 2 * n);
    (c.pass == Pass::forward ? fwd : bwd).push_back(c);
  }
  for (const auto& r : plan.routes) {
    if (r.carrier != Carrier::copy_engine || r.tokens <= 0) continue;
    const int inst_gpu = instance_gpu(r.instance);
    const int from = r.via_gpu >= 0 ? r.via_gpu : r.src_rank;
    if (from == inst_gpu) continue;
    const std::int64_t bytes = r.tokens * per_token;
    if (from == gpu) {
      fwd.push_back({Pass::forward,
                     "tokens",
                     bytes, inst_gpu, -1});
    }
    if (inst_gpu == gpu) {  // forward outputs back, and in backward the output gradients come back too
      fwd.push_back({Pass::forward,
                     "outputs",
                     bytes, from, after(r.instance, 0)});
      bwd.push_back({Pass::backward,
                     "input grads",
                     bytes, from, after(r.instance, n)});
    }
  }
  auto by_wait = [](const CopyTask& a, const CopyTask& b) { return a.after_gemm < b.after_gemm; };
  std::stable_sort(fwd.begin(), fwd.end(), by_wait);
  std::stable_sort(bwd.begin(), bwd.end(), by_wait);
  for (auto& c : fwd) out.copies.push_back(c);
  for (auto& c : bwd) out.copies.push_back(c);
  return out;
}

std::vector<Plan> load_plans_jsonl(const std::string& path, std::size_t limit) {
  return read_plans_jsonl(path, limit);
}

}  // namespace epsim::hw
