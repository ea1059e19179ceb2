#include "sim/balancers/micromoe.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include "sim/balancers/lp_solver.hpp"
#include "sim/balancers/micromoe_flow.hpp"
#include "sim/balancers/micromoe_rounding.hpp"
#include "sim/balancers/placement.hpp"
#include "sim/hardware/dtype.hpp"

namespace epsim {

std::vector<std::vector<int>> micromoe_replica_layout(int num_experts, int num_gpus, int redundant_per_gpu,
                                                      Placement placement) {
  std::vector<std::vector<int>> layout(num_gpus);
  if (num_gpus < 2) return layout;
  const int per_gpu = num_experts / num_gpus;
  std::vector<std::vector<int>> home_experts(num_gpus);
  for (int e = 0; e < num_experts; ++e) home_experts[home_gpu(e, num_experts, num_gpus, placement)].push_back(e);
  const int slots = std::min(redundant_per_gpu, num_experts - per_gpu);
  for (int g = 0; g < num_gpus; ++g) {
    for (int j = 0; j < slots; ++j) {
      const int d = j % (num_gpus - 1);
      const int m = j / (num_gpus - 1);
      const int h = ((g - 1 - d) % num_gpus + num_gpus) % num_gpus;
      layout[g].push_back(home_experts[h][(m + g) % per_gpu]);
    }
  }
  return layout;
}

namespace {

/// An empty schedule: the columns of `gpus_of`'s instances, every row zero.
MicroMoeSchedule empty_schedule(int n, const std::vector<std::vector<int>>& gpus_of) {
  MicroMoeSchedule result;
  result.first_column.resize(gpus_of.size() + 1);
  result.first_column[0] = 0;
  for (std::size_t e = 0; e < gpus_of.size(); ++e)
    result.first_column[e + 1] = result.first_column[e] + static_cast<int>(gpus_of[e].size());
  result.split.assign(static_cast<std::size_t>(n) * result.columns(), 0);
  return result;
}

/// The flow solver: loads per expert, the exact integer min-max, then each expert's totals by source.
MicroMoeSchedule schedule_by_flow(const TraceRecord& record, int n, int experts, int gpus_per_node,
                                  const std::vector<std::vector<int>>& gpus_of) {
  MicroMoeSchedule result = empty_schedule(n, gpus_of);
  std::vector<std::int64_t> loads(experts, 0);
  for (int s = 0; s < n; ++s)
    for (int e = 0; e < experts; ++e) loads[e] += record.count(s, e, experts);
  ReplicaBalance balance = micromoe_balance_over_replicas(loads, gpus_of, n);
  result.lp_max_load = static_cast<double>(balance.max_load);
  const std::size_t stride = static_cast<std::size_t>(result.columns());
  std::vector<std::int64_t> counts(n);
  for (int e = 0; e < experts; ++e) {
    std::int64_t* column = result.split.data() + result.first_column[e];
    if (gpus_of[e].size() == 1) {
      for (int s = 0; s < n; ++s) column[s * stride] = record.count(s, e, experts);
      continue;
    }
    for (int s = 0; s < n; ++s) counts[s] = record.count(s, e, experts);
    micromoe_split_by_source(counts, gpus_of[e], balance.per_instance[e], gpus_per_node, column, stride);
  }
  return result;
}

/// The lp solver (GLPK), as documented in docs/balancers.md.
MicroMoeSchedule schedule_by_lp(const TraceRecord& record, int num_gpus, int num_experts, int gpus_per_node,
                                const std::vector<std::vector<int>>& gpus_of, const MicroMoeParams& params) {
  const int n = num_gpus;
  const int experts = num_experts;
  MicroMoeSchedule result = empty_schedule(n, gpus_of);
  LpSolver lp;
  const int z = lp.add_column(0, LpSolver::kInf, 1.0);
  std::vector<double> fixed(n, 0.0);  // tokens with a single instance: constants, not variables
  std::vector<std::vector<std::pair<int, double>>> on_gpu(n);
  std::vector<std::vector<int>> column(static_cast<std::size_t>(n) * experts);
  for (int s = 0; s < n; ++s) {
    for (int e = 0; e < experts; ++e) {
      const std::size_t p = static_cast<std::size_t>(s) * experts + e;
      const std::int64_t c = record.count(s, e, experts);
      const std::vector<int>& gpus = gpus_of[e];
      if (c == 0) continue;
      if (gpus.size() == 1) {
        result.row(s)[result.first_column[e]] = c;
        fixed[gpus[0]] += static_cast<double>(c);
        continue;
      }
      std::vector<std::pair<int, double>> terms;
      for (int g : gpus) {
        const int col = lp.add_column(0, LpSolver::kInf, 0.0);
        column[p].push_back(col);
        on_gpu[g].push_back({col, 1.0});
        terms.push_back({col, 1.0});
      }
      lp.add_row(terms, static_cast<double>(c), static_cast<double>(c));
    }
  }
  for (int g = 0; g < n; ++g) {
    on_gpu[g].push_back({z, -1.0});
    lp.add_row(on_gpu[g], -LpSolver::kInf, -fixed[g]);
  }
  if (!lp.minimize()) throw std::logic_error("micromoe: GLPK found no optimum for the load LP");
  result.lp_max_load = lp.value(z);
  if (params.minimize_traffic && lp.num_columns() > 1) {
    // Lexicographic: keep the optimal max load, minimize moved tokens. The last basis stays feasible
    // under the bound z <= z*, so the second solve starts from it.
    lp.set_column_bounds(z, 0, result.lp_max_load);
    lp.set_cost(z, 0.0);
    for (int s = 0; s < n; ++s)
      for (int e = 0; e < experts; ++e) {
        const std::size_t p = static_cast<std::size_t>(s) * experts + e;
        for (std::size_t r = 0; r < column[p].size(); ++r) {
          const int g = gpus_of[e][r];
          const double cost = g == s ? 0.0 : g / gpus_per_node == s / gpus_per_node ? 1.0 : params.internode_traffic_weight;
          lp.set_cost(column[p][r], cost);
        }
      }
    if (!lp.minimize()) throw std::logic_error("micromoe: GLPK found no optimum for the traffic LP");
  }
  for (std::size_t p = 0; p < column.size(); ++p) {
    if (column[p].empty()) continue;
    std::vector<double> share;
    for (int col : column[p]) share.push_back(lp.value(col));
    const int s = static_cast<int>(p / experts);
    const int e = static_cast<int>(p % experts);
    const std::vector<std::int64_t> tokens = micromoe_round_shares(share, record.count(s, e, experts));
    std::copy(tokens.begin(), tokens.end(), result.row(s) + result.first_column[e]);
  }
  return result;
}

}  // namespace

int micromoe_redundant_per_gpu(const MicroMoeParams& params, int num_experts, int num_gpus) {
  return params.redundant_per_gpu >= 0 ? params.redundant_per_gpu : num_experts / std::max(1, num_gpus);
}

MicroMoeSchedule micromoe_schedule(const TraceRecord& record, int num_gpus, int num_experts, int gpus_per_node,
                                   const std::vector<std::vector<int>>& gpus_of, const MicroMoeParams& params) {
  if (params.solver == MicroMoeSolver::flow)
    return schedule_by_flow(record, num_gpus, num_experts, gpus_per_node, gpus_of);
  return schedule_by_lp(record, num_gpus, num_experts, gpus_per_node, gpus_of, params);
}

Plan MicroMoe::plan(const TraceRecord& record, const BalancerContext& context) {
  const int n = context.num_gpus;
  const int experts = context.model->num_experts;
  if (context.gpus_per_node <= 0) throw std::logic_error("micromoe: gpus_per_node must be positive");
  Plan plan = start_plan("micromoe", record, n);
  plan.planner.site = PlannerSite::host_cpu;
  plan.planner.start = PlannerStart::before_dispatch;
  plan.planner.duration_ps = us_to_ps(params_.planner_time_us);
  for (int g = 0; g < n; ++g) plan.gemm_order[g].push_back(GemmGroup{g, {}});
  // Instance e is expert e's home copy; the replicas follow in (GPU, slot) order. All weights are
  // resident, so each GPU computes its home experts and its replicas in one grouped GEMM.
  std::vector<std::vector<int>> gpus_of(experts);
  std::vector<std::vector<int>> instance_of(experts);
  for (int e = 0; e < experts; ++e) {
    const int g = home_gpu(e, experts, n, context.placement);
    plan.instances.push_back({e, g, InstanceKind::static_expert});
    plan.gemm_order[g].front().instances.push_back(e);
    gpus_of[e] = {g};
    instance_of[e] = {e};
  }
  const std::vector<std::vector<int>> layout = micromoe_replica_layout(
      experts, n, micromoe_redundant_per_gpu(params_, experts, n), context.placement);
  for (int g = 0; g < n; ++g) {
    for (int e : layout[g]) {
      const int inst = static_cast<int>(plan.instances.size());
      plan.instances.push_back({e, g, InstanceKind::replica});
      plan.gemm_order[g].front().instances.push_back(inst);
      gpus_of[e].push_back(g);
      instance_of[e].push_back(inst);
    }
  }
  const MicroMoeSchedule schedule = micromoe_schedule(record, n, experts, context.gpus_per_node, gpus_of, params_);
  // Each column's GPU and instance, so that a row is read straight through; the routes are counted,
  // then written in place.
  const int columns = schedule.columns();
  std::vector<int> column_gpu(columns);
  std::vector<int> column_instance(columns);
  for (int e = 0; e < experts; ++e)
    for (std::size_t r = 0; r < gpus_of[e].size(); ++r) {
      column_gpu[schedule.first_column[e] + r] = gpus_of[e][r];
      column_instance[schedule.first_column[e] + r] = instance_of[e][r];
    }
  std::size_t routes = 0;
  for (const std::int64_t tokens : schedule.split) routes += tokens != 0 ? 1 : 0;
  plan.routes.resize(routes);
  TokenRoute* route = plan.routes.data();
  for (int s = 0; s < n; ++s) {
    const std::int64_t* row = schedule.row(s);
    for (int c = 0; c < columns; ++c) {
      if (row[c] == 0) continue;
      *route++ = {s, column_instance[c], row[c], column_gpu[c] == s ? Carrier::none : Carrier::ep_backend, -1, 0};
    }
  }
  // Synchronisation, once per optimizer step, charged in the record of the step's first micro-batch:
  // each replica receives its expert's updated weights from the home copy before the dispatch, and
  // sends its weight gradients to the home copy after its weight-gradient GEMM, in the gradient
  // precision (the home copy holds the optimizer state and applies the summed gradients).
  if (params_.sync && record.micro_batch == 0) {
    const ModelSpec& model = *context.model;
    const std::int64_t params_per_expert =
        static_cast<std::int64_t>(model.matrices_per_expert()) * model.hidden_size * model.expert_ffn_size;
    const std::int64_t weight_bytes = params_per_expert * model.dtype_bytes;
    const std::int64_t grad_bytes =
        params_per_expert * (params_.grad_bytes_per_param > 0 ? params_.grad_bytes_per_param : model.dtype_bytes);
    for (int inst = experts; inst < static_cast<int>(plan.instances.size()); ++inst) {
      const int e = plan.instances[inst].expert;
      const int g = plan.instances[inst].gpu;
      const int home = plan.instances[e].gpu;
      plan.transfers.push_back({TransferKind::weights, PassKind::forward, Carrier::ep_backend,
                                TransferStart::before_dispatch, inst, home, g, weight_bytes});
      plan.transfers.push_back(
          {TransferKind::gradients, PassKind::backward, Carrier::ep_backend, TransferStart::after_dispatch, inst, g,
           home, grad_bytes});
    }
  }
  return plan;
}

std::unique_ptr<Balancer> make_micromoe(ConfigMap& params) {
  MicroMoeParams p;
  if (params.has("redundant_per_gpu"))
    p.redundant_per_gpu =
        static_cast<int>(params.get_int("redundant_per_gpu", 0, std::numeric_limits<int>::max()));
  p.solver = params.get_choice_or("solver", "flow", {"flow", "lp"}) == "lp" ? MicroMoeSolver::lp : MicroMoeSolver::flow;
  p.sync = params.get_bool_or("sync", p.sync);
  if (params.has("gradient_dtype"))
    p.grad_bytes_per_param = element_bytes(parse_dtype(params.get_choice("gradient_dtype", dtype_names())));
  p.minimize_traffic = params.get_bool_or("minimize_traffic", p.minimize_traffic);
  p.internode_traffic_weight = params.get_double_or("internode_traffic_weight", p.internode_traffic_weight, 0, 1e6);
  // An hour bounds the value so that the conversion to picoseconds cannot overflow.
  p.planner_time_us = params.get_double_or("planner_time_us", p.planner_time_us, 0, 3.6e9);
  return std::make_unique<MicroMoe>(p);
}

}  // namespace epsim
