#include "sim/replay/replay.hpp"

#include <algorithm>
#include <deque>
#include <exception>
#include <memory>
#include <stdexcept>

#include "sim/balancers/cannot_serve.hpp"
#include "sim/balancers/hbm_fit.hpp"
#include "sim/balancers/oracle.hpp"
#include "sim/balancers/placement.hpp"
#include "sim/balancers/registry.hpp"
#include "sim/core/input_error.hpp"
#include "sim/replay/ordered_pool.hpp"
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

/// One record on its way through the replay: planned on the calling thread, then simulated (possibly
/// on another thread), then handed to on_layer. Owns everything its outcome refers to.
struct RecordWork {
  TraceRecord record;  ///< remapped to the EP degree
  std::string place;   ///< "record N (step, mb, layer)", for errors
  std::vector<std::int64_t> local_tokens;
  Plan plan;
  bool warmup = false;  ///< the balancer's steady state, read right after it planned this record
  /// Among the first timeline_records records, which `epsim run` may draw: only their transfers are
  /// named on the timeline (a wide layer has millions, and nothing else reads the names).
  bool drawn = false;
  LayerResult result;
  LayerBound bound;
  LayerMetrics metrics;
};

/// What every record's simulation reads and nothing writes once the replay has started.
struct ReplayShared {
  const ExperimentSpec& spec;
  const TraceHeader& header;
  std::vector<int> home;  ///< per expert, under the base placement
  std::string hardware_file;
};

/// The sequential half: reads the next record and plans it. Balancers keep state from one record to
/// the next (history, steady state), so records are planned one at a time in trace order. Returns
/// null after the last record.
class RecordPlanner {
 public:
  RecordPlanner(const ExperimentSpec& spec, TraceReader& reader, const ReplayShared& shared)
      : spec_(spec), reader_(reader), shared_(shared), balancer_(make_balancer(spec.balancer, spec.source_file)) {
    context_.num_gpus = spec.ep_degree;
    context_.gpus_per_node = spec.hardware.gpus_per_node;
    context_.placement = spec.placement;
    context_.model = &spec.model;
    context_.hardware = &spec.hardware;
  }

  std::unique_ptr<RecordWork> next() {
    if (spec_.max_records > 0 && planned_ >= static_cast<std::size_t>(spec_.max_records)) return nullptr;
    if (!reader_.next(raw_)) return nullptr;
    const TraceHeader& header = shared_.header;
    const int n = spec_.ep_degree;
    const int experts = spec_.model.num_experts;
    auto w = std::make_unique<RecordWork>();
    w->record = header.num_ranks == static_cast<std::uint32_t>(n)
                    ? raw_
                    : remap_ranks(raw_, header, static_cast<std::uint32_t>(n));
    const TraceRecord& record = w->record;
    // Tokens each rank feeds into the layer: its assignments over top-k.
    w->local_tokens.assign(n, 0);
    for (int s = 0; s < n; ++s) {
      std::int64_t assignments = 0;
      for (int e = 0; e < experts; ++e) assignments += record.count(s, e, experts);
      w->local_tokens[s] = assignments / static_cast<std::int64_t>(header.top_k);
    }

    // Some configurations can only be checked against the cluster and the model, which a balancer
    // first sees here: they are the user's input, reported at the balancer's entry.
    const std::string balancer_place =
        spec_.balancer.params_place.empty() ? spec_.source_file : spec_.balancer.params_place;
    const std::string cannot = "balancer '" + spec_.balancer.name + "' cannot serve EP " + std::to_string(n) +
                               " on " + spec_.hardware.name + ": ";
    w->place = "record " + std::to_string(planned_) + " " + record_key_text(record);
    w->drawn = planned_ < static_cast<std::size_t>(std::max(0, spec_.timeline_records));
    try {
      w->plan = balancer_->plan(record, context_);
    } catch (const CannotServe& e) {
      throw BalancerCannotServe(balancer_place, "", cannot + e.what());
    } catch (const std::invalid_argument& e) {
      throw BalancerCannotServe(balancer_place, "", cannot + e.what());
    }
    validate_plan(w->plan, experts, spec_.hardware.gpus_per_node);
    if (const auto overflow = hbm_overflow(w->plan, spec_.model, spec_.hardware))
      throw BalancerCannotServe(shared_.hardware_file, w->place, cannot + *overflow);
    w->warmup = !balancer_->last_plan_steady();
    ++planned_;
    return w;
  }

 private:
  const ExperimentSpec& spec_;
  TraceReader& reader_;
  const ReplayShared& shared_;
  BalancerContext context_;
  std::unique_ptr<Balancer> balancer_;
  TraceRecord raw_;
  std::size_t planned_ = 0;
};

/// The parallel half: the engine on the record's plan, then its metrics beside the oracle's bound.
/// Touches only `w` and reads `shared`, so records can be simulated on any threads at once.
void simulate_record(const ReplayShared& shared, RecordWork& w) {
  const ExperimentSpec& spec = shared.spec;
  try {
    w.result = simulate_layer(spec.hardware, spec.model, w.plan, w.local_tokens, spec.backward, &w.record, w.drawn);
  } catch (const TimeOverflow& e) {
    throw InputError(shared.hardware_file, w.place,
                     std::string(e.what()) + " (hardware " + spec.hardware.name + ", model " + spec.model.name +
                         ", EP " + std::to_string(spec.ep_degree) +
                         "): the bandwidths, TFLOP/s or latencies are too small for the trace's token counts");
  }
  const TraceHeader& header = shared.header;
  MetricsInput in;
  in.record = &w.record;
  in.layer_id = header.layer_ids.empty() ? w.record.layer : header.layer_ids[w.record.layer];
  in.num_experts = spec.model.num_experts;
  in.gpus_per_node = spec.hardware.gpus_per_node;
  in.home_gpu = &shared.home;
  in.plan = &w.plan;
  in.result = &w.result;
  // The oracle: computed, not simulated (sim/balancers/oracle.hpp).
  w.bound = oracle_bound(w.record, spec.hardware, spec.model, spec.ep_degree, w.local_tokens,
                         static_cast<int>(header.top_k), spec.backward);
  in.bound = &w.bound;
  in.warmup = w.warmup;
  w.metrics = compute_layer_metrics(in);
}

LayerOutcome outcome(const ReplayShared& shared, const RecordWork& w) {
  return LayerOutcome{shared.header, w.record, w.plan, w.result, w.metrics, w.local_tokens, w.bound};
}

}  // namespace

std::size_t replay(const ExperimentSpec& spec, const std::function<void(const LayerOutcome&)>& on_layer,
                   unsigned threads) {
  TraceReader reader(spec.trace_path);
  check_trace_fits(reader.header(), spec);
  ReplayShared shared{spec, reader.header(), {}, {}};
  const int experts = spec.model.num_experts;
  shared.home.resize(experts);
  for (int e = 0; e < experts; ++e) shared.home[e] = home_gpu(e, experts, spec.ep_degree, spec.placement);
  shared.hardware_file = spec.hardware.source_file.empty() ? spec.source_file : spec.hardware.source_file;
  RecordPlanner planner(spec, reader, shared);

  std::size_t replayed = 0;
  if (threads <= 1) {
    while (std::unique_ptr<RecordWork> w = planner.next()) {
      simulate_record(shared, *w);
      on_layer(outcome(shared, *w));
      ++replayed;
    }
    return replayed;
  }

  // Plan in order here, simulate on `threads` workers, deliver in order. At most 2 records per worker
  // are in flight (one simulating, one planned and waiting), so memory does not grow with the trace.
  // A record that fails is reported only once every record before it has been delivered, and a
  // planning failure only once every record planned before it has: the error and the on_layer calls
  // before it are those of the sequential replay.
  const std::size_t window = 2 * static_cast<std::size_t>(threads);
  std::deque<std::unique_ptr<RecordWork>> in_flight;
  OrderedPool pool(threads);  // declared after in_flight: its workers stop before the records go
  auto deliver_oldest = [&] {
    pool.collect_oldest();
    on_layer(outcome(shared, *in_flight.front()));
    in_flight.pop_front();
    ++replayed;
  };
  for (;;) {
    std::unique_ptr<RecordWork> w;
    std::exception_ptr planning_error;
    try {
      w = planner.next();
    } catch (...) {
      planning_error = std::current_exception();
    }
    if (!w) {
      while (!in_flight.empty()) deliver_oldest();
      if (planning_error) std::rethrow_exception(planning_error);
      return replayed;
    }
    while (in_flight.size() >= window) deliver_oldest();
    RecordWork* record = w.get();
    in_flight.push_back(std::move(w));
    pool.push([&shared, record] { simulate_record(shared, *record); });
  }
}

}  // namespace epsim
