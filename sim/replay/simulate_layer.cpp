#include "sim/replay/simulate_layer.hpp"

#include "sim/replay/exchange_fanout.hpp"
#include "sim/replay/layer_run.hpp"
#include "sim/replay/sim_context.hpp"

namespace epsim {

LayerResult simulate_layer(const HardwareSpec& hw, const ModelSpec& model, const Plan& plan,
                           const std::vector<std::int64_t>& local_tokens, bool backward,
                           const TraceRecord* record, bool transfer_names) {
  SimContext context(hw, model, plan.num_gpus);
  context.set_transfer_names(transfer_names);
  const ExchangeFanout fanout(plan, record, model, hw.ep_backend.token_copies, hw.gpus_per_node);
  LayerRun run(context, plan, fanout, local_tokens, backward);
  return run.run();
}

}  // namespace epsim
