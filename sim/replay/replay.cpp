#include "sim/replay/replay.hpp"

#include <stdexcept>

#include "sim/balancers/cannot_serve.hpp"
#include "sim/balancers/hbm_fit.hpp"
#include "sim/balancers/oracle.hpp"
#include "sim/balancers/placement.hpp"
#include "sim/balancers/registry.hpp"
#include "sim/core/input_error.hpp"
#include "sim/replay/simulate_layer.hpp"
#include "traces/format/rank_remap.hpp"
#include "traces/format/trace_check.hpp"
#include "traces/format/trace_reader.hpp"

namespace epsim {

namespace {

void check_trace_fits(const TraceHeader& h, const ExperimentSpec& spec) {
  const ModelSpec& m = spec.model;
  if (static_cast<int>(h.num_experts) != m.num_experts)
    throw InputError(spec.trace_path, "header", "trace routes to " + std::to_string(h.num_experts) +
                                                    " experts but model '" + m.name + "' (" + m.source_file +
                                                    ") has " + std::to_string(m.num_experts));
  if (static_cast<int>(h.top_k) != m.top_k)
    throw InputError(spec.trace_path, "header", "trace has top-" + std::to_string(h.top_k) + " routing but model '" +
                                                    m.name + "' (" + m.source_file + ") says top-" +
                                                    std::to_string(m.top_k));
  if (!ranks_remappable(h.num_ranks, static_cast<std::uint32_t>(spec.ep_degree)))
    throw InputError(spec.trace_path, "header", "trace has " + std::to_string(h.num_ranks) +
                                                    " source ranks; EP degree " + std::to_string(spec.ep_degree) +
                                                    " must be a multiple or a divisor of that (or re-import with --ranks " +
                                                    std::to_string(spec.ep_degree) + ")");
}

}  // namespace

std::size_t replay(const ExperimentSpec& spec, const std::function<void(const LayerOutcome&)>& on_layer) {
  TraceReader reader(spec.trace_path);
  const TraceHeader& header = reader.header();
  check_trace_fits(header, spec);

  const int n = spec.ep_degree;
  const int experts = spec.model.num_experts;
  BalancerContext context;
  context.num_gpus = n;
  context.gpus_per_node = spec.hardware.gpus_per_node;
  context.placement = spec.placement;
  context.model = &spec.model;
  context.hardware = &spec.hardware;
  auto balancer = make_balancer(spec.balancer, spec.source_file);
  std::vector<int> home(experts);
  for (int e = 0; e < experts; ++e) home[e] = home_gpu(e, experts, n, spec.placement);

  TraceRecord raw;
  std::size_t replayed = 0;
  while ((spec.max_records == 0 || replayed < static_cast<std::size_t>(spec.max_records)) && reader.next(raw)) {
    const TraceRecord record = header.num_ranks == static_cast<std::uint32_t>(n)
                                   ? raw
                                   : remap_ranks(raw, header, static_cast<std::uint32_t>(n));
    // Tokens each rank feeds into the layer: its assignments over top-k.
    std::vector<std::int64_t> local_tokens(n, 0);
    for (int s = 0; s < n; ++s) {
      std::int64_t assignments = 0;
      for (int e = 0; e < experts; ++e) assignments += record.count(s, e, experts);
      local_tokens[s] = assignments / static_cast<std::int64_t>(header.top_k);
    }

    // Some configurations can only be checked against the cluster and the model, which a balancer
    // first sees here: they are the user's input, reported at the balancer's entry.
    const std::string balancer_place =
        spec.balancer.params_place.empty() ? spec.source_file : spec.balancer.params_place;
    const std::string cannot = "balancer '" + spec.balancer.name + "' cannot serve EP " +
                               std::to_string(n) + " on " + spec.hardware.name + ": ";
    const std::string& hardware_file =
        spec.hardware.source_file.empty() ? spec.source_file : spec.hardware.source_file;
    const std::string record_place = "record " + std::to_string(replayed) + " " + record_key_text(record);
    Plan plan;
    try {
      plan = balancer->plan(record, context);
    } catch (const CannotServe& e) {
      throw BalancerCannotServe(balancer_place, "", cannot + e.what());
    } catch (const std::invalid_argument& e) {
      throw BalancerCannotServe(balancer_place, "", cannot + e.what());
    }
    validate_plan(plan, experts, spec.hardware.gpus_per_node);
    if (const auto overflow = hbm_overflow(plan, spec.model, spec.hardware))
      throw BalancerCannotServe(hardware_file, record_place, cannot + *overflow);
    LayerResult result;
    try {
      result = simulate_layer(spec.hardware, spec.model, plan, local_tokens, spec.backward, &record);
    } catch (const TimeOverflow& e) {
      throw InputError(hardware_file, record_place,
                       std::string(e.what()) + " (hardware " + spec.hardware.name + ", model " + spec.model.name +
                           ", EP " + std::to_string(n) +
                           "): the bandwidths, TFLOP/s or latencies are too small for the trace's token counts");
    }

    MetricsInput in;
    in.record = &record;
    in.layer_id = header.layer_ids.empty() ? record.layer : header.layer_ids[record.layer];
    in.num_experts = experts;
    in.gpus_per_node = spec.hardware.gpus_per_node;
    in.home_gpu = &home;
    in.plan = &plan;
    in.result = &result;
    // The oracle: computed, not simulated (sim/balancers/oracle.hpp).
    const LayerBound bound = oracle_bound(record, spec.hardware, spec.model, n, local_tokens,
                                          static_cast<int>(header.top_k), spec.backward);
    in.bound = &bound;
    in.warmup = !balancer->last_plan_steady();
    const LayerMetrics metrics = compute_layer_metrics(in);
    on_layer(LayerOutcome{header, record, plan, result, metrics});
    ++replayed;
  }
  return replayed;
}

}  // namespace epsim
