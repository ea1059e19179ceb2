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
      // The simulator's task names with the GEMM's group (" g<k>": gemm_order[gpu][k]), so that
      // `epsim validate` pairs each with its own group whatever order either side ran them in
      // (docs/validation.md, "Matching").
      t.group = static_cast<int>(forward.size());
      t.name = "gemm fwd g" + std::to_string(t.group);
      t.instances = group.instances;
      for (int i : group.instances) t.tokens.push_back(tokens.at(static_cast<std::size_t>(i)));
      forward.push_back(t);
    }
  }
  for (const auto& t : forward) out.gemms.push_back(t);
  // The backward in the simulator's order: each backward_first group's data and weight gradient, then
  // the other groups' data gradients, then their weight gradients. dgrad_at / wgrad_at: the index in
  // out.gemms of group k's data and weight gradient.
  const int n = static_cast<int>(forward.size());
  std::vector<int> dgrad_at(forward.size(), -1), wgrad_at(forward.size(), -1);
  auto add_backward = [&](int k, bool dgrad) {
    GemmTask t = forward[static_cast<std::size_t>(k)];
    t.pass = Pass::backward;
    t.name = (dgrad ? "gemm dgrad g" : "gemm wgrad g") + std::to_string(t.group);
    (dgrad ? dgrad_at : wgrad_at)[static_cast<std::size_t>(k)] = static_cast<int>(out.gemms.size());
    out.gemms.push_back(std::move(t));
  };
  auto first = [&](int k) { return plan.gemm_order[static_cast<std::size_t>(gpu)][static_cast<std::size_t>(k)].backward_first; };
  for (int k = 0; k < n; ++k)
    if (first(k)) {
      add_backward(k, true);
      add_backward(k, false);
    }
  for (const bool dgrad : {true, false})
    for (int k = 0; k < n; ++k)
      if (!first(k)) add_backward(k, dgrad);

  // GEMM group of each instance on this GPU.
  std::vector<int> group_of(plan.instances.size(), -1);
  for (int k = 0; k < n; ++k)
    for (int i : forward[static_cast<std::size_t>(k)].instances) group_of.at(static_cast<std::size_t>(i)) = k;
  // The index of the GEMM an instance's copy waits for: its forward GEMM, data or weight gradient.
  enum class Kernel { forward, dgrad, wgrad };
  auto after = [&](int instance, Kernel kernel) {
    const int k = group_of.at(static_cast<std::size_t>(instance));
    if (k < 0) return -1;
    if (kernel == Kernel::forward) return k;
    return (kernel == Kernel::dgrad ? dgrad_at : wgrad_at)[static_cast<std::size_t>(k)];
  };
  const std::int64_t per_token = token_bytes(hidden, dtype_bytes);
  auto instance_gpu = [&](int i) { return plan.instances.at(static_cast<std::size_t>(i)).gpu; };
  // Forward copies that leave at the start go in the simulator's order on the engine: weights that
  // leave at the layer's start (before_dispatch, prefetch), then weights that wait for the planner
  // (after_dispatch), then tokens; `rank` orders them before the sort by after_gemm.
  std::vector<CopyTask> fwd, bwd;
  std::vector<int> fwd_rank;
  for (const auto& tr : plan.transfers) {
    if (tr.carrier != Carrier::copy_engine || tr.src_gpu != gpu || tr.bytes <= 0) continue;
    CopyTask c;
    c.pass = tr.pass == PassKind::forward ? Pass::forward : Pass::backward;
    c.name = std::string(tr.kind == TransferKind::weights ? "weights e" : "grads e") +
             std::to_string(plan.instances.at(static_cast<std::size_t>(tr.instance)).expert);
    c.bytes = tr.bytes;
    c.dst_gpu = tr.dst_gpu;
    // Backward Copy Engine transfers leave after their instance's weight-gradient GEMM (after_dispatch
    // and after_wgrad alike; find_plan_defect allows no other start for them).
    if (c.pass == Pass::backward) c.after_gemm = after(tr.instance, Kernel::wgrad);
    if (c.pass == Pass::forward) {
      fwd.push_back(c);
      fwd_rank.push_back(tr.start == TransferStart::after_dispatch ? 1 : 0);
    } else {
      bwd.push_back(c);
    }
  }
  for (const auto& r : plan.routes) {
    if (r.carrier != Carrier::copy_engine || r.tokens <= 0) continue;
    const int inst_gpu = instance_gpu(r.instance);
    const int from = r.via_gpu >= 0 ? r.via_gpu : r.src_rank;
    if (from == inst_gpu) continue;
    const std::int64_t bytes = r.tokens * per_token;
    if (from == gpu) {
      fwd.push_back({Pass::forward, "tokens", bytes, inst_gpu, -1});
      fwd_rank.push_back(2);
    }
    if (inst_gpu == gpu) {  // forward outputs back, and in backward the output gradients come back too
      fwd.push_back({Pass::forward, "outputs", bytes, from, after(r.instance, Kernel::forward)});
      fwd_rank.push_back(2);
      bwd.push_back({Pass::backward, "input grads", bytes, from, after(r.instance, Kernel::dgrad)});
    }
  }
  std::vector<std::size_t> fwd_order(fwd.size());
  for (std::size_t k = 0; k < fwd.size(); ++k) fwd_order[k] = k;
  std::stable_sort(fwd_order.begin(), fwd_order.end(), [&](std::size_t a, std::size_t b) {
    if (fwd[a].after_gemm != fwd[b].after_gemm) return fwd[a].after_gemm < fwd[b].after_gemm;
    return fwd_rank[a] < fwd_rank[b];
  });
  // Backward copies leave as their GEMMs end, which backward_first groups reorder.
  auto by_wait = [](const CopyTask& a, const CopyTask& b) { return a.after_gemm < b.after_gemm; };
  std::stable_sort(bwd.begin(), bwd.end(), by_wait);
  for (std::size_t k : fwd_order) out.copies.push_back(fwd[k]);
  for (auto& c : bwd) out.copies.push_back(c);
  return out;
}

std::vector<GpuTasks> load_gpu_tasks(const std::string& path, std::size_t limit, int gpu, int hidden,
                                     int dtype_bytes) {
  std::vector<GpuTasks> tasks;
  for_each_plan(path, limit, [&](Plan&& plan, std::uint64_t, std::uint64_t) {
    tasks.push_back(extract_gpu_tasks(plan, gpu, hidden, dtype_bytes));
  });
  return tasks;
}

}  // namespace epsim::hw
