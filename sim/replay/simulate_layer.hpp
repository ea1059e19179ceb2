// One Plan through the engine: builds the layer's resources, runs the task graph, returns the result.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/hardware/hardware_spec.hpp"
#include "sim/hardware/model_spec.hpp"
#include "sim/plan/plan.hpp"
#include "sim/replay/layer_result.hpp"
#include "traces/format/trace_types.hpp"

namespace epsim {

/// `local_tokens[g]`: tokens rank g feeds into the layer. `record`: the trace record the plan was made
/// from, or null; with hw.ep_backend.token_copies per_gpu or per_node its token ids (when it has
/// them) give the exact copies each EP leg moves, else they are expected from the plan's counts
/// (ExchangeFanout). `transfer_names`: the timeline names each exchange hop ("dispatch 3->5"); without
/// them they are empty, which saves an allocation per transfer where no one reads the names. Each call
/// starts from an idle cluster at time 0, so layers are independent and the result depends on
/// nothing but the arguments.
LayerResult simulate_layer(const HardwareSpec& hw, const ModelSpec& model, const Plan& plan,
                           const std::vector<std::int64_t>& local_tokens, bool backward,
                           const TraceRecord* record = nullptr, bool transfer_names = true);

}  // namespace epsim
