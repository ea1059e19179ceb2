#include "sim/replay/timeline.hpp"

namespace epsim {

const char* to_string(Track track) {
  switch (track) {
    case Track::compute: return "compute";
    case Track::comm_kernel: return "comm_kernel";
    case Track::copy_engine: return "copy_engine";
    case Track::nvlink_out: return "nvlink_out";
    case Track::nic_out: return "nic_out";
    case Track::host_cpu: return "host_cpu";
  }
  return "?";
}

}  // namespace epsim
