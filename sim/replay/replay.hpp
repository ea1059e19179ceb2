// The replay loop: trace records in order -> balancer -> Plan -> engine -> metrics, with the oracle's
// bound for the same record beside it. Streaming: records are planned one at a time in trace order,
// simulated on one or more threads and delivered in trace order; memory does not grow with the trace.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "sim/core/input_error.hpp"
#include "sim/hardware/experiment_spec.hpp"
#include "sim/plan/plan.hpp"
#include "sim/replay/layer_metrics.hpp"
#include "sim/replay/layer_result.hpp"
#include "traces/format/trace_types.hpp"

namespace epsim {

/// The experiment's balancer cannot serve its configuration: the balancer said so (CannotServe, or a
/// parameter it can only check against the cluster and model), or its plan's expert weights do not
/// fit in a GPU's HBM. An InputError (`epsim run` stops with exit 2); `epsim compare` shows the row
/// as n/a with this message and goes on with the other rows.
class BalancerCannotServe : public InputError {
 public:
  using InputError::InputError;
};

struct LayerOutcome {
  const TraceHeader& header;
  const TraceRecord& record;  ///< counts as replayed (remapped to the EP degree)
  const Plan& plan;
  const LayerResult& result;
  const LayerMetrics& metrics;
  const std::vector<std::int64_t>& local_tokens;  ///< tokens each rank feeds the layer (assignments / top-k)
  const LayerBound& bound;                        ///< the oracle's bound for the record
};

/// Replays `spec`'s trace (at most spec.max_records records when > 0) and calls `on_layer` for each.
/// Throws InputError when the trace does not fit the experiment (expert count, top-k, ranks that
/// cannot be remapped to the EP degree) or is corrupt, or when a record's simulated time is beyond the
/// horizon (kMaxTime_ps: absurd bandwidths or rates for the trace's token counts); BalancerCannotServe
/// when the balancer cannot serve the configuration. Returns the number of records replayed.
///
/// `threads` > 1 simulates up to that many records at once (the balancer still plans them in order on
/// the calling thread, and on_layer is called on the calling thread in trace order). Outcomes, on_layer
/// calls and the error raised are the same for every thread count: an error is that of the first
/// failing record, raised after on_layer has seen every record before it and none after.
std::size_t replay(const ExperimentSpec& spec, const std::function<void(const LayerOutcome&)>& on_layer,
                   unsigned threads = 1);

}  // namespace epsim
