#include "sim/hardware/hardware_spec.hpp"

namespace epsim {

const char* to_string(CommEngine engine) { return engine == CommEngine::sms ? "sms" : "copy_engine"; }

const char* to_string(TokenCopies copies) {
  switch (copies) {
    case TokenCopies::per_expert: return "per_expert";
    case TokenCopies::per_gpu: return "per_gpu";
    case TokenCopies::per_node: return "per_node";
  }
  return "per_expert";
}

const char* to_string(BandwidthSharing sharing) {
  switch (sharing) {
    case BandwidthSharing::exact: return "exact";
    case BandwidthSharing::epochs: return "epochs";
    case BandwidthSharing::per_link: return "per_link";
    case BandwidthSharing::local: return "local";
    case BandwidthSharing::coupled: return "coupled";
    case BandwidthSharing::automatic: return "auto";
  }
  return "exact";
}

std::optional<BandwidthSharing> bandwidth_sharing_from_string(std::string_view name) {
  for (const BandwidthSharing mode : {BandwidthSharing::exact, BandwidthSharing::epochs, BandwidthSharing::per_link,
                                      BandwidthSharing::local, BandwidthSharing::coupled, BandwidthSharing::automatic})
    if (name == to_string(mode)) return mode;
  return std::nullopt;
}

std::string auto_ranges(const EngineSpec& engine, std::string_view unit) {
  std::string text = "exact up to " + std::to_string(engine.exact_max_gpus);
  text.append(unit);
  if (engine.coupled_max_gpus > engine.exact_max_gpus) text += ", coupled up to " + std::to_string(engine.coupled_max_gpus);
  return text + ", local beyond";
}

BandwidthSharing sharing_for(const EngineSpec& engine, int num_gpus) {
  if (engine.bandwidth_sharing != BandwidthSharing::automatic) return engine.bandwidth_sharing;
  if (num_gpus <= engine.exact_max_gpus) return BandwidthSharing::exact;
  return num_gpus <= engine.coupled_max_gpus ? BandwidthSharing::coupled : BandwidthSharing::local;
}

}  // namespace epsim
