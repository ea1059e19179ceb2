#include "sim/replay/simulate_layer.hpp"

#include "sim/replay/layer_run.hpp"
#include "sim/replay/sim_context.hpp"

namespace epsim {

LayerResult simulate_layer(const HardwareSpec& hw, const ModelSpec& model, const Plan& plan,
                           const std::vector<std::int64_t>& local_tokens, bool backward) {
  SimContext context(hw, model, plan.num_gpus);
  LayerRun run(context, plan, local_tokens, backward);
  return run.run();
}

}  // namespace epsim
