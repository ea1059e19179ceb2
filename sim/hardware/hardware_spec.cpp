#include "sim/hardware/hardware_spec.hpp"

namespace epsim {

const char* to_string(CommEngine engine) { return engine == CommEngine::sms ? "sms" : "copy_engine"; }

}  // namespace epsim
