// What a flow's completion callback reads first, given when the flow starts so that the coarse
// sharing models can request it ahead of the call (FlowTable::prefetch_end).
//
// Why: a wide layer's flows end in scattered order, long after they started, so each callback's
// first reads are cache misses, one after the other: an EP message's hop, then the list of the hops
// it feeds or the count of those that feed it (AllToAllV::launch). Requested together when the
// flow's last bound is found met, they arrive while the model settles the group; the hints change
// no result.
#pragma once

namespace epsim {

struct EndHints {
  const void* first = nullptr;  ///< read first by the callback, or null
  const void* then = nullptr;   ///< read next, once `first` is in (its address known now), or null
};

}  // namespace epsim
