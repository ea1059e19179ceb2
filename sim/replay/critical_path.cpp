#include "sim/replay/critical_path.hpp"

#include <algorithm>
#include <tuple>
#include <vector>

namespace epsim {

const char* to_string(PathResource resource) {
  switch (resource) {
    case PathResource::sm: return "SM";
    case PathResource::copy_engine: return "Copy Engine";
    case PathResource::nvlink: return "NVLink";
    case PathResource::nic: return "NIC";
    case PathResource::host: return "host";
    case PathResource::wait: return "waiting";
  }
  return "?";
}

double CriticalPath::share(PathResource r) const {
  return length_ps > 0 ? static_cast<double>(time_ps[static_cast<std::size_t>(r)]) / static_cast<double>(length_ps)
                       : 0.0;
}

PathResource CriticalPath::bound() const {
  std::size_t best = static_cast<std::size_t>(PathResource::wait);
  for (std::size_t r = 0; r + 1 < kPathResources; ++r)
    if (time_ps[r] > 0 && (best == static_cast<std::size_t>(PathResource::wait) || time_ps[r] > time_ps[best])) best = r;
  return static_cast<PathResource>(best);
}

namespace {

/// An EP kernel's time outside its flows is spent on SMs (its fixed cost, packing), so it is charged
/// there; its flows are charged to the link they leave on.
PathResource resource_of(Track track) {
  switch (track) {
    case Track::compute: return PathResource::sm;
    case Track::comm_kernel: return PathResource::sm;
    case Track::copy_engine: return PathResource::copy_engine;
    case Track::nvlink_out: return PathResource::nvlink;
    case Track::nic_out: return PathResource::nic;
    case Track::host_cpu: return PathResource::host;
  }
  return PathResource::wait;
}

/// Among tasks ending at the same instant: the fabric before the kernel that drives it (the flow is
/// what the kernel waited for), then the compute stream, then the Copy Engine and the host.
int tie_rank(Track track) {
  switch (track) {
    case Track::nic_out: return 0;
    case Track::nvlink_out: return 1;
    case Track::compute: return 2;
    case Track::copy_engine: return 3;
    case Track::host_cpu: return 4;
    case Track::comm_kernel: return 5;
  }
  return 6;
}

}  // namespace

CriticalPath critical_path(const Timeline& timeline, Pass pass, Time_ps start_ps, Time_ps end_ps) {
  CriticalPath path;
  path.length_ps = std::max<Time_ps>(0, end_ps - start_ps);
  // What the walk reads of each task, copied side by side: sorting pointers into a wide layer's
  // timeline (half a million events) read an event from memory at every comparison. Tasks that end
  // at one instant are told apart by the walk's own key below, never by their order here (tasks
  // equal in all four fields add the same time to the same resource), so the order the sort leaves
  // them in does not matter.
  struct Task {
    Time_ps end_ps;
    Time_ps start_ps;
    int gpu;
    Track track;
  };
  std::vector<Task> events;
  // Room for every event at once: one block of about the same size for every pass of every record,
  // which the executables' allocator hands back from the last (sim/memory/block_cache.hpp).
  events.reserve(timeline.events.size());
  for (const TimelineEvent& e : timeline.events)
    if (e.pass == pass && e.end_ps > e.start_ps && e.end_ps <= end_ps && e.end_ps > start_ps)
      events.push_back({e.end_ps, e.start_ps, e.gpu, e.track});
  std::sort(events.begin(), events.end(), [](const Task& a, const Task& b) { return a.end_ps < b.end_ps; });

  auto& wait = path.time_ps[static_cast<std::size_t>(PathResource::wait)];
  Time_ps t = end_ps;
  int gpu = -1;
  while (t > start_ps) {
    // The last task to end at or before t.
    const auto after = std::upper_bound(events.begin(), events.end(), t,
                                        [](Time_ps v, const Task& e) { return v < e.end_ps; });
    if (after == events.begin()) break;
    const Time_ps latest = (after - 1)->end_ps;
    const Task* pick = nullptr;
    for (auto it = after; it != events.begin() && (it - 1)->end_ps == latest; --it) {
      const Task* e = &*(it - 1);
      if (pick == nullptr) {
        pick = e;
        continue;
      }
      const auto key = [gpu](const Task* x) {
        return std::make_tuple(x->gpu == gpu ? 0 : 1, tie_rank(x->track), x->gpu, x->start_ps);
      };
      if (key(e) < key(pick)) pick = e;
    }
    if (gpu < 0) path.last_gpu = pick->gpu;
    wait += t - latest;
    const Time_ps from = std::max(pick->start_ps, start_ps);
    path.time_ps[static_cast<std::size_t>(resource_of(pick->track))] += latest - from;
    ++path.tasks;
    t = from;
    gpu = pick->gpu;
  }
  if (t > start_ps) wait += t - start_ps;
  return path;
}

}  // namespace epsim
